"""The owner's dashboard: server-rendered HTML pages over the memory API, and the directory of chats.

Pure Python, standard library only, like the rest of the engine: the local host and the
Worker (so Pyodide too) serve it at `/dashboard` on the API's own port. Its parts:

- `markup`: the one template helper (every value escaped unless marked as HTML).
- `auth`: signed sessions, CSRF tokens, one-time login links (owner and chat admin).
- `views`: the chat-side reads the pages need (people, a message in its context).
- `directory`: the directory of chats (one row a chat, its usage per day and tier), kept by
  the directory object; each chat reports to it after a write.
- `charts`: inline SVG charts made on the server.
- `pages`, `chat_pages`: the HTML; `app`: the routes, the login and the actions.

Every action is a call of the memory API's route table (`app.Backend.call`): no second write path.
"""
