"""``mkg ui``: the memory viewer, a local web page over what MKG remembers."""

from __future__ import annotations

import contextlib
import socket
import time
import webbrowser
from typing import Any

import click

from ..errors import GraphUnavailable
from . import App, fail, guarded, pass_app

#: How long to wait for the local Neo4j MKG starts itself when it was down.
LOCAL_START_SECONDS = 60


@click.command("ui")
@click.option(
    "--port",
    default=0,
    type=click.IntRange(0, 65535),
    help="Port on 127.0.0.1 (default: a free one).",
)
@click.option("--no-browser", is_flag=True, help="Only print the address; do not open a browser.")
@pass_app
def ui_command(app: App, port: int, no_browser: bool) -> None:
    """Serve the memory viewer on 127.0.0.1: see, search, correct and review what MKG remembers.

    Projects, their learnings (searched as recall searches), observations, sessions with what each
    prompt was given and why, the review queue, the system prompts with their versions, a graph
    view, and new events as they arrive. It serves this user only: the address it prints carries a
    token made for this start (exchanged for a session cookie), and every change needs the page's
    CSRF token. Ctrl-C stops it.
    """
    guarded(lambda: _serve(app, port, no_browser))


def _serve(app: App, port: int, no_browser: bool) -> None:
    import uvicorn

    from ..connections import Connections
    from ..identity import resolve_project, resolve_user
    from ..ui.app import create_app
    from ..ui.security import Sessions
    from ..ui.viewer import Viewer

    settings = app.settings()
    project = resolve_project()
    user = resolve_user(project_root=project.root, adapters=app.host.harness_list())
    connections = Connections(app.host, connection_timeout=5.0, max_retry_time=5.0, schema_wait_seconds=60)
    graph = _connect(connections, settings)
    if graph is None:
        return
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(128)  # a browser that comes before the server is up waits instead of being refused
    except OSError as exc:
        sock.close()
        connections.close()
        fail(f"cannot listen on 127.0.0.1:{port} ({exc.strerror}); pick another --port")
        return
    bound = int(sock.getsockname()[1])
    viewer = Viewer(
        settings=settings,
        graph=graph,
        user_id=user.id,
        sessions=Sessions(bound),
        home_project=project.id,
        make_embedder=lambda: connections.embedder_for(settings),
    )
    server = _server(
        uvicorn.Config(
            create_app(viewer),
            host="127.0.0.1",
            port=bound,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=5,
            lifespan="off",
        ),
        viewer,
    )
    url = viewer.sessions.url()
    click.echo(f"MKG memory viewer for {user.id}: {url}")
    click.echo(
        "The address carries a token made for this start; keep it to yourself. Ctrl-C stops the viewer."
    )
    if not no_browser:
        with contextlib.suppress(Exception):
            webbrowser.open(url)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn raises the Ctrl-C again once it has shut down
        pass
    finally:
        viewer.stopping.set()
        sock.close()
        connections.close()
    click.echo("The memory viewer stopped.")


def _connect(connections: Any, settings: Any) -> Any:
    """The graph, once Neo4j answers (MKG's own Neo4j is started when it is down); None after an
    error was printed."""
    deadline = time.monotonic() + (LOCAL_START_SECONDS if settings.local_neo4j else 0)
    while True:
        try:
            return connections.graph_for(settings)
        except GraphUnavailable as exc:
            if time.monotonic() >= deadline:
                connections.close()
                fail(str(exc))
                return None
            time.sleep(1.0)


def _server(config: Any, viewer: Any) -> Any:
    """uvicorn's server, told to end the live streams first when it is asked to stop, so that it
    does not wait on them."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            viewer.stopping.set()
            super().handle_exit(sig, frame)

    return Server(config)
