// Instantiates every wrapper of the WGMMA library (src/emit/cuda/wgmma.cuh) in a kernel, for
// nvcc with sm_90a (tests/wgmma_library.rs): ptxas checks every shape, type triple, transpose
// and the RS form. Compiled, never run.
#include "wgmma.cuh"
namespace w = choreo_wgmma;
template <class Op, int N>
__device__ void one(std::uint64_t da, std::uint64_t db, int s, std::uint32_t* out) {
  using M = w::Mma<Op, N>;
  typename M::Acc d[M::kRegs];
  for (int i = 0; i < M::kRegs; ++i) d[i] = 0;
  const std::uint32_t a[4] = {out[0], out[1], out[2], out[3]};
  w::fence();
  M::template ss<0, 0>(d, da, db, s);
  M::template rs<0>(d, a, db, 1);
  w::commit_group();
  w::wait_group<0>();
  w::fence_operands(d);
  for (int i = 0; i < M::kRegs; ++i) out[threadIdx.x * M::kRegs + i] = (std::uint32_t)d[i];
}
template <class Op, int N>
__device__ void one16(std::uint64_t da, std::uint64_t db, int s, std::uint32_t* out) {
  using M = w::Mma<Op, N>;
  typename M::Acc d[M::kRegs] = {};
  const std::uint32_t a[4] = {out[0], out[1], out[2], out[3]};
  M::template ss<1, 1>(d, da, db, s);
  M::template ss<1, 0>(d, da, db, s);
  M::template rs<1>(d, a, db, 1);
  for (int i = 0; i < M::kRegs; ++i) out[threadIdx.x * M::kRegs + i] = (std::uint32_t)d[i];
}
#define X(OP, N) one<w::OP, N>(da, db, s, out);
#define EACH(OP) CHOREO_WGMMA_FOR_EACH_N(X, OP)
#define Y(OP, N) one16<w::OP, N>(da, db, s, out);
#define EACH16(OP) CHOREO_WGMMA_FOR_EACH_N(Y, OP)
__global__ void all(std::uint64_t da, std::uint64_t db, int s, std::uint32_t* out) {
  CHOREO_WGMMA_FOR_EACH_OP(EACH)
  CHOREO_WGMMA_FOR_EACH_OP16(EACH16)
}
