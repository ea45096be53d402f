// The Prometheus endpoint: HTTP/1.0 on a loopback address, GET /metrics
// answered with the text exposition `render` returns; anything else 404.
// One connection at a time, each limited to 8 KiB of request and 2 s.
#pragma once

#include <functional>
#include <string>
#include <thread>

namespace railgate::control {

class metrics_server {
public:
    // `endpoint` is HOST:PORT with a loopback HOST (as the config checks).
    // Throws std::runtime_error when it cannot listen.
    metrics_server(const std::string& endpoint, std::function<std::string()> render);
    ~metrics_server();
    metrics_server(const metrics_server&) = delete;
    metrics_server& operator=(const metrics_server&) = delete;

private:
    void run();
    void serve(int fd);
    std::function<std::string()> render_;
    int listen_fd_ = -1;
    int wake_[2] = {-1, -1};
    std::thread thread_;
};

} // namespace railgate::control
