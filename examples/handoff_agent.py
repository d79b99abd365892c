#!/usr/bin/env python3
"""A handoff agent on the iacp library (clients/python).

It answers every handoff request with a response correlated to it, and acknowledges each
message once it is answered: iacp.Agent long-polls the inbox and does that; the handler only
says what the answer is. (handoff_agent_http.py does the same with raw HTTP.)

    pip install ./clients/python                             # once; or PYTHONPATH=clients/python
    python3 examples/handoff_agent.py --data-dir .data/b     # address and token from the data dir
    python3 examples/handoff_agent.py --api 127.0.0.1:9701 --token T [--once]
"""
import argparse
import os
import sys

try:
    import iacp
except ImportError:
    sys.exit("the iacp library is not installed: `pip install ./clients/python` from the repository's root, "
             "or run with PYTHONPATH=clients/python")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=os.environ.get("IACP_DATA_DIR", ".data/node"))
    p.add_argument("--api", help="host:port of the node's API (default: <data-dir>/api.addr)")
    p.add_argument("--token", help="API token (default: <data-dir>/api.token)")
    p.add_argument("--once", action="store_true", help="exit after the first message")
    a = p.parse_args()

    agent = iacp.Agent(iacp.Client(a.api, a.token, a.data_dir))

    @agent.on("handoff")
    def handoff(msg: iacp.Message) -> dict:
        """The agent's work: accept the handoff and say what was done."""
        print("answering", msg.message_id, "from", msg.sender_id, flush=True)
        return {"status": "accepted", "detail": "done by the python agent", "echo": msg.payload}

    try:
        agent.run(max_messages=1 if a.once else None)
    except KeyboardInterrupt:
        pass
    except iacp.IACPError as e:
        sys.exit(str(e))


if __name__ == "__main__":
    main()
