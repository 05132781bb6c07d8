import contextlib
import socket
import threading
import time


@contextlib.contextmanager
def running(app):
    """``app`` served by uvicorn on a free 127.0.0.1 port in a thread; yields the port."""
    import uvicorn
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.05)
    try:
        yield port
    finally:
        srv.should_exit = True
        thread.join(10)
