// mdspan, spanned_view, spanned_data and their constructors (runtime-abi §2, §9.2-§9.6).
#include "choreo.h"

#include "check.h"

#define N_ROWS 3  // a #define constant as a make_spandata argument

using namespace choreo;

// Explicit span types in user-written host functions.
static void Fill(choreo::spanned_data<choreo::s32, 3>& d) {
  for (size_t i = 0; i < d.shape()[0]; ++i)
    for (size_t j = 0; j < d.shape()[1]; ++j)
      for (size_t k = 0; k < d.shape()[2]; ++k) d[i][j][k] = int(i * 100 + j * 10 + k);
}

// A wrapper receives `const spanned_view&` and still writes through data() (runtime-abi §2).
static void wrapper_like(const choreo::spanned_view<float, 2>& x, float value) {
  auto& M = x.shape()[0];
  auto& K = x.shape()[1];
  static_assert(std::is_same<decltype(M), const size_t&>::value, "symbol binding type");
  static_assert(std::is_same<decltype(x.data()), float*>::value, "data() of a const view");
  for (size_t i = 0; i < M * K; ++i) x.data()[i] = value;
}

static choreo::spanned_data<float, 2> make_result() {
  auto o = choreo::make_spandata<choreo::f32, 2>({2, 3});
  o.fill(7);
  return o;  // moves
}

// The spans' type properties.
static_assert(!std::is_copy_constructible<spanned_data<float, 2>>::value, "move-only");
static_assert(!std::is_copy_assignable<spanned_data<float, 2>>::value, "move-only");
static_assert(std::is_nothrow_move_constructible<spanned_data<float, 2>>::value, "movable");
static_assert(std::is_trivially_copyable<spanned_view<float, 2>>::value, "a view is plain data");
static_assert(spanned_view<half, 3>::rank() == 3, "rank");
static_assert(std::is_same<decltype(make_spandata<float>(2, 3)), spanned_data<float, 2>>::value,
              "the variadic form's rank is its argument count");

int main() {
  // --- mdspan ---
  const mdspan<3> s3{2, 3, 4};
  CHECK_EQ(s3.size(), 3u);
  CHECK_EQ(s3[0], 2u);
  CHECK_EQ(s3[2], 4u);
  CHECK_EQ(s3.element_count(), 24u);
  CHECK(s3 == (mdspan<3>{2, 3, 4}));
  CHECK(s3 != (mdspan<3>{2, 3, 5}));
  const mdspan<3> filled{5};  // one value fills every extent
  CHECK(filled == (mdspan<3>{5, 5, 5}));
  size_t sum = 0;
  for (size_t e : s3) sum += e;
  CHECK_EQ(sum, 9u);
  std::ostringstream printed;
  printed << s3;
  CHECK_EQ(printed.str(), std::string("2 3 4"));

  // --- make_spandata: every argument kind host code uses ---
  constexpr size_t kCols = 4;
  int rows_int = 2;
  size_t rows_size = 2;
  unsigned rows_unsigned = 2;
  long rows_long = 2;
  auto a = make_spandata<float>(N_ROWS, kCols, 5);
  auto b = make_spandata<float>(rows_int, rows_size, rows_unsigned, rows_long);
  CHECK(a.shape() == (mdspan<3>{3, 4, 5}));
  CHECK(b.shape() == (mdspan<4>{2, 2, 2, 2}));
  CHECK_EQ(a.element_count(), 60u);
  CHECK_EQ(a.bytes(), 60u * sizeof(float));
  CHECK_EQ(a.rank(), 3u);
  auto braced = make_spandata<f16, 2>({3, kCols});
  CHECK(braced.shape() == (mdspan<2>{3, 4}));
  auto same_shape = make_spandata<float, 3>(a.shape());
  CHECK(same_shape.shape() == a.shape());
  CHECK(a.data() != nullptr && a.data() != same_shape.data());

  // --- operator[]: row-major, chained, every subscript type ---
  for (size_t i = 0; i < a.element_count(); ++i) a.data()[i] = float(i);
  for (size_t i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (unsigned k = 0; k < 5; ++k) CHECK_EQ(a[i][j][k], float((i * 4 + j) * 5 + k));
  a[2][3][4] = -1.0f;
  CHECK_EQ(a.data()[59], -1.0f);
  int nine = 9;
  CHECK_EQ(a[nine / 3 - 1][nine / 4][0], float((2 * 4 + 2) * 5));
  const auto& a_const = a;
  static_assert(std::is_same<decltype(a_const[0][0][0]), const float&>::value, "const access");
  static_assert(std::is_same<decltype(a_const.data()), const float*>::value, "const data()");
  static_assert(std::is_same<decltype(a[0][0][0]), float&>::value, "mutable access");
  CHECK_EQ(a_const[1][1][1], float((1 * 4 + 1) * 5 + 1));
  auto one = make_spandata<double>(4);
  static_assert(std::is_same<decltype(one[0]), double&>::value, "rank 1 yields T&");
  one[3] = 2.5;
  CHECK_EQ(one.data()[3], 2.5);

  // --- fill ---
  a.fill(0);
  CHECK_EQ(a[1][2][3], 0.0f);
  a.fill(1.0f);
  CHECK_EQ(a[2][3][4], 1.0f);
  a.fill(0.0f);
  CHECK_EQ(a[0][0][0], 0.0f);
  braced.fill(2);
  CHECK_EQ(float(braced[2][3]), 2.0f);
  braced.fill(0.5f);
  CHECK_EQ(float(braced[1][0]), 0.5f);
  auto narrow = make_spandata<s4>(3);
  narrow.fill(-2);
  CHECK_EQ(int(narrow[2]), -2);

  spanned_data<s32, 3> cube = make_spandata<s32>(2, 3, 4);
  Fill(cube);
  CHECK_EQ(cube[1][2][3], 123);

  // --- view(): same memory and shape, no copy ---
  auto v = a.view();
  static_assert(std::is_same<decltype(v), spanned_view<float, 3>>::value, "view type");
  CHECK(v.data() == a.data());
  CHECK(v.shape() == a.shape());
  v[1][1][1] = 42.0f;
  CHECK_EQ(a[1][1][1], 42.0f);
  v.fill(3);
  CHECK_EQ(a[0][2][4], 3.0f);
  const auto v_copy = v;  // views copy
  CHECK(v_copy.data() == v.data());
  CHECK_EQ(v_copy[0][0][0], 3.0f);
  v_copy[0][0][0] = 4.0f;  // a const view still writes (like a pointer)
  CHECK_EQ(a[0][0][0], 4.0f);
  CHECK_EQ(v.element_count(), 60u);
  CHECK_EQ(v.bytes(), 240u);

  auto matrix = make_spandata<float>(2, 3);
  wrapper_like(matrix.view(), 9.0f);
  CHECK_EQ(matrix[1][2], 9.0f);

  // --- moves ---
  auto result = make_result();
  CHECK_EQ(result[1][2], 7.0f);
  float* before = result.data();
  auto moved = std::move(result);
  CHECK(moved.data() == before);
  CHECK(result.data() == nullptr);
  result = make_spandata<float>(1, 1);
  CHECK(result.shape() == (mdspan<2>{1, 1}));

  // --- make_spanview: both template-argument orders build the same view ---
  float raw[12];
  for (int i = 0; i < 12; ++i) raw[i] = float(i) * 0.5f;
  auto tr = make_spanview<float, 2>(raw, {3, 4});
  auto rt = make_spanview<2, float>(raw, {3, 4});
  auto deduced = make_spanview<2>(raw, {3, 4});
  static_assert(std::is_same<decltype(tr), spanned_view<float, 2>>::value, "<T, R>");
  static_assert(std::is_same<decltype(rt), spanned_view<float, 2>>::value, "<R, T>");
  static_assert(std::is_same<decltype(deduced), spanned_view<float, 2>>::value, "<R>");
  CHECK(tr.data() == rt.data() && rt.data() == deduced.data() && tr.data() == raw);
  CHECK(tr.shape() == rt.shape() && rt.shape() == deduced.shape());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      CHECK_EQ(tr[i][j], rt[i][j]);
      CHECK_EQ(tr[i][j], raw[i * 4 + j]);
    }
  rt[2][3] = 100.0f;
  CHECK_EQ(tr[2][3], 100.0f);
  // A single extent fills all dimensions, as in mdspan.
  CHECK((make_spanview<float, 2>(raw, {3}).shape() == mdspan<2>{3, 3}));

  // const T*, void* and const void* overloads.
  const float* craw = raw;
  auto from_const = make_spanview<float, 1>(craw, {12});
  auto from_const_rt = make_spanview<1, float>(craw, {12});
  static_assert(std::is_same<decltype(from_const), spanned_view<float, 1>>::value, "const T*");
  static_assert(std::is_same<decltype(from_const_rt), spanned_view<float, 1>>::value, "const T*");
  auto from_const_deduced = make_spanview<1>(craw, {12});
  static_assert(std::is_same<decltype(from_const_deduced), spanned_view<float, 1>>::value, "");
  CHECK(from_const.data() == raw && from_const_rt.data() == raw);
  CHECK(from_const_deduced.data() == raw);
  void* vp = raw;
  const void* cvp = raw;
  auto from_void = make_spanview<float, 2>(vp, {6, 2});
  auto from_cvoid = make_spanview<float, 2>(cvp, {6, 2});
  CHECK(from_void.data() == raw && from_cvoid.data() == raw);
  CHECK_EQ(from_void[5][1], 100.0f);
  // Device-style pointers of the CUDA element types (never dereferenced here).
  half* dev_half = reinterpret_cast<half*>(0x1000);
  __nv_bfloat16* dev_bf16 = reinterpret_cast<__nv_bfloat16*>(0x2000);
  __nv_fp8_e4m3* dev_fp8 = reinterpret_cast<__nv_fp8_e4m3*>(0x3000);
  auto dh = make_spanview<choreo::f16, 3>(dev_half, {2, 4, 8});
  auto db = make_spanview<choreo::bf16, 3>(dev_bf16, {2, 4, 8});
  auto df = make_spanview<choreo::f8_e4m3, 1>(dev_fp8, {64});
  CHECK(dh.data() == dev_half && db.data() == dev_bf16 && df.data() == dev_fp8);
  CHECK_EQ(dh.bytes(), 128u);
  CHECK_EQ(df.bytes(), 64u);

  // Array forms, and <R, T> over host arrays of choreo types.
  choreo::f32 arr1[6] = {0, 1, 2, 3, 4, 5};
  float arr2[2][3] = {{0, 1, 2}, {3, 4, 5}};
  choreo::u8 bytes[4] = {1, 2, 3, 4};
  auto va1 = make_spanview(arr1);
  auto va2 = make_spanview(arr2);
  auto vb = make_spanview<1, choreo::u8>(bytes, {4});
  static_assert(std::is_same<decltype(va2), spanned_view<float, 2>>::value, "2-D array");
  CHECK(va1.shape() == mdspan<1>{6});
  CHECK(va2.shape() == (mdspan<2>{2, 3}));
  CHECK_EQ(va1[4], 4.0f);
  CHECK_EQ(va2[1][2], 5.0f);
  CHECK_EQ(int(vb[3]), 4);
  CHECK_EQ((make_spanview<1, choreo::f32>(arr1, {6})[5]), 5.0f);

  // A sub-span proxy stays valid after the view it came from is gone.
  auto row = make_spanview<float, 2>(raw, {3, 4})[1];
  row[2] = -7.0f;
  CHECK_EQ(raw[1 * 4 + 2], -7.0f);

  // --- copy_as_spanned: a deep, owning copy ---
  auto copy = copy_as_spanned(tr.data(), tr.shape());
  static_assert(std::is_same<decltype(copy), spanned_data<float, 2>>::value, "copy type");
  CHECK(copy.data() != tr.data());
  CHECK(copy.shape() == tr.shape());
  CHECK_EQ(copy[2][3], 100.0f);
  tr[2][3] = 1.0f;
  CHECK_EQ(copy[2][3], 100.0f);
  auto copy2 = copy_as_spanned<2>(raw, {4, 3});
  CHECK(copy2.shape() == (mdspan<2>{4, 3}));
  CHECK_EQ(copy2[0][2], raw[2]);
  CHECK_EQ(copy2[3][2], raw[11]);

  std::printf("Test Passed\n");
  return 0;
}
