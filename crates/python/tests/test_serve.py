"""The HTTP server started from Python."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import ba_agent


def test_serve_answers_health_and_stops(agent_config: dict):
    agent = ba_agent.Agent(agent_config)
    server = ba_agent.serve(agent, "127.0.0.1:0")
    try:
        assert server.running
        with urllib.request.urlopen(f"{server.url}/health", timeout=10) as response:
            assert response.status == 200
            json.loads(response.read())
        request = urllib.request.Request(
            f"{server.url}/api/v1/conversations",
            headers={"Authorization": f"Bearer {server.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        try:
            urllib.request.urlopen(f"{server.url}/api/v1/conversations", timeout=10)
            raise AssertionError("the API answered without the token")
        except urllib.error.HTTPError as e:
            assert e.code == 401
    finally:
        server.stop()
    assert not server.running
    try:
        urllib.request.urlopen(f"{server.url}/health", timeout=5)
        raise AssertionError("the server still answers after stop()")
    except urllib.error.URLError:
        pass
