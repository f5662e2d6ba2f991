#pragma once
// Core types: errors, dtypes, memory spaces, buffers and tensor traits.
#include "amsp/core/buffer.hpp"
#include "amsp/core/config.hpp"
#include "amsp/core/dtype.hpp"
#include "amsp/core/error.hpp"
#include "amsp/core/memory_space.hpp"
#include "amsp/core/tensor_traits.hpp"
