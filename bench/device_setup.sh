# Sourced at the start of every GPU call: puts the carried bubblewrap on the
# PATH, copying its libraries only where the GPU host's image lacks them.
for lib in .device/bwrap/lib*.so*; do
  name=$(basename "$lib")
  ldconfig -p | grep -q "$name" || cp "$lib" /usr/lib/x86_64-linux-gnu/
done
cp .device/bwrap/bwrap /usr/local/bin/bwrap
ldconfig
export PYTHONUNBUFFERED=1
