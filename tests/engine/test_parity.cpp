// The parity suite (parity_cases.hpp) in the synchronous host space.
#include "parity_cases.hpp"

AMSP_ENGINE_PARITY_CASES(amsp::HostSerial)
