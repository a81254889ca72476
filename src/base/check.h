// CHECK: broken invariants abort with the values printed (always on).
// DCHECK: the same on per-token paths, compiled out in Release (NDEBUG).
#pragma once

#include <cstdio>
#include <cstdlib>

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, \
                   #cond);                                                 \
      std::abort();                                                        \
    }                                                                      \
  } while (0)

#define CHECK_OP_(a, b, op)                                                  \
  do {                                                                       \
    auto tern_a_ = (a);                                                      \
    auto tern_b_ = (b);                                                      \
    if (!(tern_a_ op tern_b_)) {                                             \
      std::fprintf(stderr, "CHECK failed at %s:%d: %s %s %s (%lld vs %lld)\n", \
                   __FILE__, __LINE__, #a, #op, #b, (long long)tern_a_,      \
                   (long long)tern_b_);                                      \
      std::abort();                                                          \
    }                                                                        \
  } while (0)

#define CHECK_EQ(a, b) CHECK_OP_(a, b, ==)
#define CHECK_NE(a, b) CHECK_OP_(a, b, !=)
#define CHECK_LT(a, b) CHECK_OP_(a, b, <)
#define CHECK_LE(a, b) CHECK_OP_(a, b, <=)
#define CHECK_GT(a, b) CHECK_OP_(a, b, >)
#define CHECK_GE(a, b) CHECK_OP_(a, b, >=)

#ifdef NDEBUG
#define DCHECK(cond) ((void)0)
#define DCHECK_LT(a, b) ((void)0)
#define DCHECK_LE(a, b) ((void)0)
#define DCHECK_EQ(a, b) ((void)0)
#else
#define DCHECK(cond) CHECK(cond)
#define DCHECK_LT(a, b) CHECK_LT(a, b)
#define DCHECK_LE(a, b) CHECK_LE(a, b)
#define DCHECK_EQ(a, b) CHECK_EQ(a, b)
#endif
