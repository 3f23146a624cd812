/* SPDX-License-Identifier: BSD-3-Clause */
// cxx14.cpp -- hilock.hpp under C++14: tests/abi/headers.sh expects its #error, and only that.
#include <hilock.hpp>
