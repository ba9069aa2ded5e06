"""Loop facts of device code: which loops load from memory (directly or through a jit
function they call), and which call sites run inside a loop, their caller's included."""

from __future__ import annotations

from taskformat.detectors.program.source import ProgramSource
from taskformat.detectors.program.syntax import LOADS, Func, Site


class LoopFacts(ProgramSource):
    # Identities of the loops that load; per jit function, whether it loads, whether it is
    # called inside a loop, and inside a loop that loads.
    load_loops: set[int]
    _func_loads: dict[Func, bool]
    _in_loop: dict[Func, bool]
    _in_load_loop: dict[Func, bool]

    def _loop_facts(self) -> None:
        loads = {f: any(s.name in LOADS for s in f.sites) for f in self.device}
        for _ in range(len(self.device)):
            for f in self.device:
                loads[f] = loads[f] or any(
                    s.callee is not None and loads.get(s.callee) for s in f.sites
                )
        self._func_loads = loads
        self.load_loops = set()
        for f in self.device:
            for site in f.sites:
                if site.name in LOADS or (site.callee is not None and loads.get(site.callee)):
                    self.load_loops |= {id(loop) for loop in site.loops}
        in_loop = dict.fromkeys(self.device, False)
        in_load_loop = dict.fromkeys(self.device, False)
        for _ in range(len(self.device)):
            for f in self.device:
                for site in f.sites:
                    if site.callee is None:
                        continue
                    if site.loops or in_loop[f]:
                        in_loop[site.callee] = True
                    if self.is_load_loop_site(site, in_load_loop):
                        in_load_loop[site.callee] = True
        self._in_loop, self._in_load_loop = in_loop, in_load_loop

    def is_load_loop_site(self, site: Site, inherited: dict[Func, bool] | None = None) -> bool:
        inherited = self._in_load_loop if inherited is None else inherited
        return any(id(loop) in self.load_loops for loop in site.loops) or inherited.get(
            site.func, False
        )

    def in_loop(self, site: Site) -> bool:
        return bool(site.loops) or self._in_loop.get(site.func, False)
