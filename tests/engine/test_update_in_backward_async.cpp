// EngineOptions::update_in_backward in the asynchronous host space (update_in_backward_cases.hpp):
// each bucket's update and spread run on the worker thread while the caller's backward goes on,
// so under ThreadSanitizer a missing event wait around them is a reported data race.
#include "update_in_backward_cases.hpp"

AMSP_UPDATE_IN_BACKWARD_CASES(amsp::HostAsync)
