// The `[vars]` table of a wrangler.toml, as wrangler gives them to the Worker's `env`:
// every value a string. Only what that table holds in this project is read: `KEY = "..."`
// or `KEY = '...'` lines (and bare numbers or booleans, as their text), comments and
// blank lines; anything else there is an error, so a var is never silently dropped.

export function wranglerVars(text) {
  const vars = {};
  let inVars = false;
  for (const [n, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    if (line.startsWith("[")) {
      inVars = line === "[vars]";
      continue;
    }
    if (!inVars) continue;
    const m = /^([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(.+?)\s*(#.*)?$/.exec(line);
    if (m === null) throw new Error(`wrangler.toml line ${n + 1}: not a KEY = value line in [vars]`);
    vars[m[1]] = tomlValue(m[2], n + 1);
  }
  return vars;
}

function tomlValue(value, line) {
  if (value.startsWith('"')) {
    if (!value.endsWith('"') || value.length < 2) throw new Error(`wrangler.toml line ${line}: unterminated string`);
    return JSON.parse(value); // a TOML basic string's escapes are JSON's for these values
  }
  if (value.startsWith("'")) {
    if (!value.endsWith("'") || value.length < 2) throw new Error(`wrangler.toml line ${line}: unterminated string`);
    return value.slice(1, -1); // a literal string: no escapes
  }
  if (/^(-?\d+(\.\d+)?|true|false)$/.test(value)) return value;
  throw new Error(`wrangler.toml line ${line}: unsupported value ${value}`);
}
