package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"

	"github.com/cairnmq/cairn/internal/logger"
)

// startProfiler serves Go's pprof handlers on 127.0.0.1:port, as
// nats-server's --profile flag does, for profiling the hot paths. It
// returns a function that stops the listener.
func startProfiler(port int, log *logger.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	log.Noticef("profiling port: %d", ln.Addr().(*net.TCPAddr).Port)
	return func() { _ = srv.Close() }, nil
}
