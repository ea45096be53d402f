// The Prometheus endpoint: HTTP/1.0 on a loopback address, GET /metrics
// answered with the text exposition `render` returns; anything else 404.
// Connections are served side by side on one thread, each limited to 8 KiB
// of request, the time to send it, and the time to take the answer: a
// client that sends nothing or stops reading delays no other scrape, is cut
// off at its deadline, and never holds up railgated's exit. Past `clients`
// connections, a new one pushes out the oldest that has not yet sent its
// request (a scraper sends it at once).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace railgate::control {

struct metrics_limits {
    std::chrono::milliseconds request{2000}; // from the connection to the request's blank line
    std::chrono::milliseconds answer{3000};  // from then until the whole answer is handed to the kernel
    unsigned clients = 16;                   // connections served at once
};

class metrics_server {
public:
    // `endpoint` is HOST:PORT with a loopback HOST (as the config checks).
    // Throws std::runtime_error when it is not that or cannot listen.
    metrics_server(const std::string& endpoint, std::function<std::string()> render, metrics_limits limits = {});
    ~metrics_server();
    metrics_server(const metrics_server&) = delete;
    metrics_server& operator=(const metrics_server&) = delete;

private:
    struct client;
    void run();
    void accept_all(std::vector<client>& cs);
    bool step(client& c); // false: done with it (answered, cut off, or gone)
    std::string answer(const std::string& request) const;
    std::function<std::string()> render_;
    metrics_limits limits_;
    int listen_fd_ = -1;
    int wake_[2] = {-1, -1};
    std::thread thread_;
};

} // namespace railgate::control
