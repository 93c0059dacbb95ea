"""Peak memory (RSS) of `chatbot import ... --dry-run` on hostile export files.

    .venv/bin/python benchmarks/import_memory.py [--depth 200000] [--cap-mb 4096]

Writes the files of the attacker's probe (issue 24, finding 1) and runs the real command on
each in a child process, printing the child's peak RSS (`os.wait4`). A baseline in the same
run: the same command on a genuine export of the same size. The child runs under an address
space cap (`--cap-mb`) so a file that still explodes is reported as such instead of taking
the machine down with it.

- nested: a Telegram header holding `depth` nested brackets (a 400 KB file at 200,000);
- nested-discord: the same inside a DiscordChatExporter `guild`;
- mentions: a Discord message of 5,000 `<@1>` naming a 100,000-character person (120 KB);
- sparse: a 500 MB sparse file (zeros), refused; where the error is has to be found;
- a genuine 30 MB export: parsed whole (a file of up to 64 MB: about 7x its size in memory);
  a bigger one is streamed, and memory stays flat however big the file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.hostile import genuine, mentions, nested, nested_discord, peak_rss


def main() -> None:
    """Prints one line per file: its size, the child's peak RSS and how it ended."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--depth", type=int, default=200_000)
    parser.add_argument("--cap-mb", type=int, default=4096)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = {
            "baseline (genuine, 400 KB)": ("telegram", genuine(400_000)),
            f"nested telegram ({args.depth})": ("telegram", nested(args.depth)),
            f"nested discord ({args.depth})": ("discord", nested_discord(args.depth)),
            "amplified mentions (discord)": ("discord", mentions()),
            "genuine, 30 MB (186,000 messages)": ("telegram", genuine(30_000_000)),
        }
        print(f"{'file':34} {'size':>10} {'peak RSS':>10} {'vs base':>8}  exit  last line")
        base = None
        for i, (name, (platform, data)) in enumerate(files.items()):
            path = folder / f"f{i}.json"
            path.write_bytes(data)
            mb, code, last = peak_rss(platform, path, args.cap_mb)
            base = base or mb
            print(f"{name:34} {len(data) / 1000:8.0f}KB {mb:8.1f}MB {mb / base:7.1f}x  {code:4}  {last}")
        sparse = folder / "sparse.json"
        with open(sparse, "wb") as f:
            f.truncate(500 * 1024 * 1024)
        mb, code, last = peak_rss("telegram", sparse, args.cap_mb)
        ratio = mb / (base or 1)
        print(f"{'sparse 500 MB (refused)':34} {500_000:8.0f}KB {mb:8.1f}MB {ratio:7.1f}x  {code:4}  {last}")
        print(f"(children run under an address-space cap of {args.cap_mb} MB; MemoryError: the cap was hit)")


if __name__ == "__main__":
    main()
