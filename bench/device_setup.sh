# Sourced at the start of every GPU call (after bench/device_prepare.sh here, with
# ".device" carried): puts the carried bubblewrap on the PATH, copying its libraries
# only where the GPU host's image lacks them, and the carried wheels on PYTHONPATH
# with the client package of this checkout. A second call on a warm machine changes
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
  export PYTHONPATH="/tmp/d2k-site:$PWD/client:$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
