// Matmul verification (runtime-abi §9.9) and the sparse 2:4 helpers (§9.11).
//
// Modes: "" passes every verifier on a correct product and checks the sparse helpers;
// "subset-mismatch", "row-row-subset-mismatch", "sampled-mismatch" and "shape-mismatch" must
// abort with the verifier's report.
#include "choreo.h"

#include "check.h"

using namespace choreo;

constexpr size_t M = 16, K = 8, N = 12;

int main(int argc, char** argv) {
  const std::string mode = test_mode(argc, argv);
  seed_random(7);
  auto lhs = make_spandata<f16>(M, K);
  auto rhs = make_spandata<f16>(K, N);   // [k, n] for the row-col verifiers
  auto rhs_t = make_spandata<f16>(N, K);  // [n, k] for the row-row verifiers
  lhs.fill_random(-1.0f, 1.0f);
  rhs.fill_random(-1.0f, 1.0f);
  for (size_t k = 0; k < K; ++k)
    for (size_t n = 0; n < N; ++n) rhs_t[n][k] = rhs[k][n];
  auto res = make_spandata<float>(M, N);
  for (size_t m = 0; m < M; ++m)
    for (size_t n = 0; n < N; ++n) {
      float acc = 0;
      for (size_t k = 0; k < K; ++k) acc += f16_to_f32(lhs[m][k]) * f16_to_f32(rhs[k][n]);
      res[m][n] = acc;
    }

  SampledVerifierConfig cfg;
  CHECK_EQ(cfg.num_samples, 512u);
  CHECK_EQ(cfg.base_tol, 1.0f);
  CHECK_EQ(cfg.rel_tol, 0.01f);
  CHECK(!cfg.verbose);
  cfg.num_samples = 64;
  cfg.base_tol = 1e-4f;
  cfg.rel_tol = 1e-4f;

  if (mode == "subset-mismatch") {
    res[2][5] += 0.5f;  // row 2 and column 5 are on the checked grid (steps 2 and 1)
    verify_matmul_row_col_subset(lhs, rhs, res, 1e-4f, 1e-4f);
  } else if (mode == "row-row-subset-mismatch") {
    res[4][11] -= 0.5f;
    verify_matmul_row_row_subset(lhs, rhs_t, res, 1e-4f, 1e-4f);
  } else if (mode == "sampled-mismatch") {
    for (size_t i = 0; i < res.element_count(); ++i) res.data()[i] += 1.0f;
    verify_matmul_row_row_sampled(lhs.view(), rhs_t.view(), res.view(), cfg);
  } else if (mode == "shape-mismatch") {
    verify_matmul_row_col_subset(lhs, rhs_t, res, 1e-4f, 1e-4f);
  } else if (!mode.empty()) {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  if (!mode.empty()) {
    std::printf("not reached\n");
    return 0;
  }

  // A correct product passes every verifier, with spanned_data or spanned_view arguments.
  verify_matmul_row_col_subset(lhs, rhs, res, 1e-4f, 1e-4f);
  verify_matmul_row_col_subset(lhs, rhs, res, 1e-4f, 1e-4f, 100, 100);
  verify_matmul_row_row_subset(lhs.view(), rhs_t.view(), res.view(), 1e-4f, 1e-4f);
  verify_matmul_row_row_sampled(lhs.view(), rhs_t.view(), res.view(), cfg);
  verify_matmul_row_col_sampled(lhs, rhs, res, cfg);
  cfg.verbose = true;
  verify_matmul_row_row_sampled(lhs, rhs_t, res, cfg);
  verify_matmul_row_row_sampled(lhs, rhs_t, res);  // the default configuration
  // A tolerance only the default configuration accepts: everything off by 0.5.
  for (size_t i = 0; i < res.element_count(); ++i) res.data()[i] += 0.5f;
  verify_matmul_row_row_sampled(lhs, rhs_t, res);

  // --- sparse 2:4 ---
  static_assert(utils::SparsePolicyWGMMA<f16>::k_per_instruction == 32, "f16 K");
  static_assert(utils::SparsePolicyWGMMA<bf16>::k_per_instruction == 32, "bf16 K");
  static_assert(utils::SparsePolicyWGMMA<f8_e4m3>::k_per_instruction == 64, "fp8 K");
  using Policy = utils::SparsePolicyWGMMA<f16>;
  constexpr size_t R = 8, C = 32, G = C / 4;
  std::mt19937 gen(42);
  auto dense = make_spandata<f16>(R, C);
  dense.fill(5.0f);  // init must clear everything it does not set
  Policy::init_structured_sparse_A(dense, gen);
  for (size_t r = 0; r < R; ++r)
    for (size_t g = 0; g < G; ++g) {
      int nonzeros = 0;
      for (size_t c = 0; c < 4; ++c) {
        const float x = to_f32(dense[r][4 * g + c]);
        CHECK(x >= -1.0f && x <= 1.0f);
        nonzeros += x != 0.0f;
      }
      CHECK_EQ(nonzeros, 2);
    }
  // The same generator state gives the same matrix.
  std::mt19937 gen_again(42);
  auto dense_again = make_spandata<f16>(R, C);
  Policy::init_structured_sparse_A(dense_again, gen_again);
  CHECK(std::memcmp(dense.data(), dense_again.data(), dense.bytes()) == 0);

  // Make one group all-zero: it is encoded as positions {0, 1}.
  for (size_t c = 0; c < 4; ++c) dense[3][4 * 5 + c] = 0.0f;
  auto packed = make_spandata<f16>(R, C / 2);
  auto meta = make_spandata<u8>(R, G / 2);
  meta.fill(0xff);  // stale bits must not survive encoding
  Policy::encode(dense, packed, meta);
  for (size_t r = 0; r < R; ++r)
    for (size_t g = 0; g < G; ++g) {
      const unsigned code = (meta[r][g / 2] >> (4 * (g % 2))) & 0xfu;
      const size_t idx0 = code & 3u, idx1 = code >> 2;
      CHECK(idx0 < idx1);
      CHECK(dense[r][4 * g + idx0] == packed[r][2 * g]);
      CHECK(dense[r][4 * g + idx1] == packed[r][2 * g + 1]);
      for (size_t c = 0; c < 4; ++c)
        if (c != idx0 && c != idx1) CHECK_EQ(to_f32(dense[r][4 * g + c]), 0.0f);
    }
  CHECK_EQ(int(meta[3][2] >> 4), 0x4);  // group 5 (odd): idx0 = 0, idx1 = 1

  std::printf("Test Passed\n");
  return 0;
}
