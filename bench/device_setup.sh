# Sourced at the start of every GPU call (after bench/device_prepare.sh here, with
# ".device" carried): puts the carried bubblewrap on the PATH, copying its libraries
# only where the GPU host's image lacks them, and the carried wheels on PYTHONPATH
# with the client package of this checkout (laid out as its build lays it out). A second call on a warm machine changes
# nothing that a process left running by the first (a worker) may be using.
for lib in .device/bwrap/lib*.so*; do
  name=$(basename "$lib")
  ldconfig -p | grep -q "$name" || cp "$lib" /usr/lib/x86_64-linux-gnu/
done
cmp -s .device/bwrap/bwrap /usr/local/bin/bwrap || cp .device/bwrap/bwrap /usr/local/bin/bwrap
ldconfig
if [ -d .device/wheels ]; then
  if [ ! -f /tmp/d2k-site/.installed ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/d2k-site .device/wheels/*.whl && touch /tmp/d2k-site/.installed
  fi
  # The client as its build lays it out: runformat/ inside it as d2k_client.runformat.
  rm -rf /tmp/d2k-client && mkdir -p /tmp/d2k-client &&
    cp -r client/d2k_client /tmp/d2k-client/ && cp -r runformat /tmp/d2k-client/d2k_client/runformat
  export PYTHONPATH="/tmp/d2k-site:/tmp/d2k-client:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
# The host's image ships torch and Triton without bytecode, and a sandboxed process
# may not write it: every process of an evaluation compiled them again (import torch
# 4-5 s instead of 2.8 s, the child's imports 10-11 s instead of 6-7 s on the H200).
if [ ! -f /tmp/d2k-bytecode ]; then
  python3 -m compileall -q -j 0 $(python3 -c "import importlib.util as u; print(*(u.find_spec(m).submodule_search_locations[0] for m in ('torch', 'triton')))") >/dev/null &&
    touch /tmp/d2k-bytecode
fi
export PYTHONUNBUFFERED=1
