# Sourced by the ci/ scripts: provision the CUDA compiler when missing and export its location.
# CUDA_HOME, PATH and CHOREO_CUDA_ROOT point at the toolkit afterwards. CHOREO_CUDA_MAJOR=12
# selects CUDA 12 (see ci/install-cuda); the default is CUDA 13.
_choreo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CHOREO_CUDA_ROOT=$("$_choreo_root/ci/install-cuda")
export CHOREO_CUDA_ROOT
export CUDA_HOME="$CHOREO_CUDA_ROOT"
export PATH="$CHOREO_CUDA_ROOT/bin:$PATH"
cd "$_choreo_root"
unset _choreo_root
