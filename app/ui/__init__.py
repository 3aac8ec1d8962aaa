"""The web console at /ui: the owner's window on the memory (SPEC "Web console").

Server-rendered pages over the same use cases as the REST routers, a session cookie
for a pasted token, CSRF tokens on every form, and a strict Content-Security-Policy.
Its stylesheet and its one small script are files of this package: it needs no
internet.

This package's own module imports nothing (its pages import it for `render`): the app
mounts the console through app.ui.console.
"""
