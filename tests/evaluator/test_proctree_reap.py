"""What the sandbox's clean-up kills after a child: the child's strays, never the
parent's own processes (its GPU monitors), and it never frees a spared pid."""

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json, os, signal, subprocess, time
    from evaluator.harness import proctree

    proctree.become_subreaper()
    monitor = subprocess.Popen(["sleep", "60"])            # the parent's own: spared
    dead_monitor = subprocess.Popen(["sleep", "60"])       # spared, and dies
    stray = subprocess.Popen(["sleep", "60"])              # the child's leftover
    # An orphan: started by a process that exits at once (reparented to a subreaper, or
    # found below us while its parent still lives).
    orphan_parent = subprocess.Popen(["sh", "-c", "sleep 60 & wait"])
    time.sleep(0.3)
    os.kill(dead_monitor.pid, signal.SIGKILL)
    time.sleep(0.3)
    proctree.reap_orphans(spare={monitor.pid, dead_monitor.pid})
    out = {
        "monitor_alive": monitor.poll() is None,
        "stray_alive": proctree.pid_alive(stray.pid),
        "orphan_tree_alive": [p for p in proctree.descendants(os.getpid())
                              if p not in (monitor.pid, dead_monitor.pid)],
        # Not reaped by the clean-up: its owner's wait still finds it (its pid held).
        "dead_monitor_reaped_by_owner": os.waitpid(dead_monitor.pid, os.WNOHANG)[0]
        == dead_monitor.pid,
    }
    monitor.kill(); monitor.wait()
    print(json.dumps(out))
    """
)


def test_the_clean_up_kills_the_strays_and_spares_the_parent_s_own_processes():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=True
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out == {
        "monitor_alive": True,
        "stray_alive": False,
        "orphan_tree_alive": [],
        "dead_monitor_reaped_by_owner": True,
    }
