// railctl built with AddressSanitizer (meson's b_sanitize): no leak check at
// exit by default. railctl lives milliseconds, the tests start it hundreds of
// times each, and LeakSanitizer's check (it stops the process under ptrace
// and scans its memory) cost 65 ms of its 97 ms a run on a host where a page
// fault costs 10-20 us. ASAN_OPTIONS=detect_leaks=1 checks it again
// (tests/netns/control_plane.sh does, once per run); railgated, the worker
// library and the unit tests keep the check.
extern "C" const char* __asan_default_options();
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
