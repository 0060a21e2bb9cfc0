#pragma once

#include <functional>
#include <string>

namespace gcrun {

// Runs work(0), ..., work(count - 1) on `count` threads and joins them all. The threads begin
// their work only once every one of them exists: when the system cannot create one (a thread
// limit, no room for its stack) none has started waiting on its peers, all are joined, and a
// std::runtime_error says in one line which thread of how many `what` could not start, instead
// of std::terminate for a thread left joinable. An exception that escapes `work` is rethrown
// here (the first one) after every thread has ended.
void runThreadTeam(int count, const std::function<void(int)>& work, const std::string& what);

}  // namespace gcrun
