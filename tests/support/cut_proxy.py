#!/usr/bin/env python3
"""A TCP proxy for the shell tests, the chaos suite's (tests/chaos/nemesis.py).

  cut_proxy.py TARGET_PORT

prints the port it listens on (127.0.0.1) and forwards to 127.0.0.1:TARGET_PORT.
SIGUSR1 cuts: open connections stall, new ones are closed at once. SIGUSR2
heals: every connection open during the cut is closed (what it carried is
lost, never delivered late), new ones pass. SIGTERM stops it.
"""
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chaos"))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from nemesis import Proxy  # noqa: E402


def main():
    proxy = Proxy([int(sys.argv[1])])
    signal.signal(signal.SIGUSR1, lambda *_: setattr(proxy, "mode", "cut"))
    signal.signal(signal.SIGUSR2, lambda *_: proxy.heal())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(proxy.port, flush=True)
    try:
        while True:
            signal.pause()
    finally:
        proxy.close()


if __name__ == "__main__":
    main()
