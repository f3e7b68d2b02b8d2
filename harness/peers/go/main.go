// go-peer -- the Go reference row: net/http from the standard library, the project's routes with
// their bytes (docs/README.md's route spec), a goroutine per connection.
//
//	build/bin/go-peer --port 8080 --threads 1     # GOMAXPROCS 1: one core
//	curl -v localhost:8080/delay/100              # 200 text/plain "100", after 100 ms
//
// /delay waits with time.Sleep: the goroutine is parked on the runtime's timer heap and its thread
// runs other goroutines -- the blocking model's code with an async model's wait. /block calls
// nanosleep(2) directly, as a blocking driver would: the goroutine holds its OS thread in the
// system call, the runtime starts another thread for the rest, and past debug.SetMaxThreads
// (10,000 by default) the program dies. /cpu burns CPU on its thread; /echo answers the body.
// --threads N sets GOMAXPROCS; --max-threads N sets that limit lower, to see it hit with a few
// hundred connections; --port 0 picks a free port, --port-file FILE writes it once listening.
// SIGTERM/SIGINT: stop accepting, finish what is in flight, exit 0.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

const (
	maxDelayMs   = 60000
	maxCPUUs     = 1000000
	maxBodyBytes = 1 << 20
)

func reply(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Server", "go-net-http")
	w.WriteHeader(status)
	w.Write(body)
}

func text(w http.ResponseWriter, status int, body string) {
	reply(w, status, "text/plain", []byte(body))
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	text(w, http.StatusMethodNotAllowed, "method not allowed\n")
}

// bounded reads {n} of a route: decimal digits only, at most max; leading zeros are fine.
func bounded(digits string, max uint64) (uint64, bool) {
	if digits == "" || len(digits) > 20 || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil && n <= max
}

// blockThread holds this goroutine's OS thread in nanosleep(2) for ms, as a blocking driver's
// call would; a signal (the runtime's preemption) only shortens one call, the rest is slept.
func blockThread(ms uint64) {
	left := syscall.NsecToTimespec(int64(ms) * int64(time.Millisecond))
	for {
		var rest syscall.Timespec
		if err := syscall.Nanosleep(&left, &rest); err != syscall.EINTR {
			return
		}
		left = rest
	}
}

func threadCPUTime() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3 // CLOCK_THREAD_CPUTIME_ID
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

// burnCPU spends us microseconds of this thread's CPU, the goroutine locked to the thread so the
// clock it reads is the one it burns.
func burnCPU(us uint64) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	end := threadCPUTime() + time.Duration(us)*time.Microsecond
	for threadCPUTime() < end {
	}
}

// numeric serves /delay/{ms}, /block/{ms} and /cpu/{us}; false when the path is none of them.
func numeric(w http.ResponseWriter, r *http.Request) bool {
	routes := []struct {
		prefix, what string
		max          uint64
	}{{"/delay/", "delay in ms", maxDelayMs}, {"/block/", "block in ms", maxDelayMs}, {"/cpu/", "cpu in us", maxCPUUs}}
	for _, route := range routes {
		if !strings.HasPrefix(r.URL.Path, route.prefix) {
			continue
		}
		arg := strings.TrimPrefix(r.URL.Path, route.prefix)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, "GET, HEAD, OPTIONS")
			return true
		}
		n, ok := bounded(arg, route.max)
		if !ok {
			text(w, http.StatusBadRequest, fmt.Sprintf("%s must be decimal digits from 0 to %d\n", route.what, route.max))
			return true
		}
		switch route.prefix {
		// [go-wait]
		case "/delay/":
			time.Sleep(time.Duration(n) * time.Millisecond)
		case "/block/":
			blockThread(n)
		// [go-wait]
		default:
			burnCPU(n)
		}
		text(w, http.StatusOK, strconv.FormatUint(n, 10))
		return true
	}
	return false
}

// echo answers POST /echo with its body, up to 1 MiB (413 from Content-Length before reading).
func echo(w http.ResponseWriter, r *http.Request) {
	tooLarge := fmt.Sprintf("request body larger than %d bytes\n", maxBodyBytes)
	if r.ContentLength > maxBodyBytes {
		text(w, http.StatusRequestEntityTooLarge, tooLarge)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		text(w, http.StatusRequestEntityTooLarge, tooLarge)
		return
	}
	reply(w, http.StatusOK, "application/octet-stream", body)
}

func route(w http.ResponseWriter, r *http.Request) {
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case r.URL.Path == "/plaintext" && get:
		text(w, http.StatusOK, "Hello, World!")
	case r.URL.Path == "/plaintext":
		methodNotAllowed(w, "GET, HEAD, OPTIONS")
	case r.URL.Path == "/echo" && r.Method == http.MethodPost:
		echo(w, r)
	case r.URL.Path == "/echo":
		methodNotAllowed(w, "POST, OPTIONS")
	case numeric(w, r):
	default:
		text(w, http.StatusNotFound, "not found\n")
	}
}

func main() {
	port := flag.Int("port", 8080, "the port (0: a free one)")
	portFile := flag.String("port-file", "", "write the port here once listening")
	threads := flag.Int("threads", 0, "GOMAXPROCS (0: the runtime's default, the CPUs it may use)")
	maxThreads := flag.Int("max-threads", 0, "debug.SetMaxThreads (0: the runtime's 10,000); one more thread ends the program")
	flag.Parse()
	if *threads > 0 {
		runtime.GOMAXPROCS(*threads)
	}
	if *maxThreads > 0 {
		debug.SetMaxThreads(*maxThreads)
	}
	listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "go-peer: %v\n", err)
		os.Exit(1)
	}
	bound := listener.Addr().(*net.TCPAddr).Port
	fmt.Printf("go-peer listening on http://127.0.0.1:%d/ (pid %d, GOMAXPROCS %d)\n", bound, os.Getpid(), runtime.GOMAXPROCS(0))
	if *portFile != "" {
		if err := os.WriteFile(*portFile, []byte(fmt.Sprintf("%d\n", bound)), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "go-peer: %v\n", err)
			os.Exit(1)
		}
	}
	server := &http.Server{Handler: http.HandlerFunc(route), IdleTimeout: 300 * time.Second}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	drained := make(chan struct{})
	go func() {
		<-stop
		server.Shutdown(context.Background()) // stops accepting, waits for what is in flight
		close(drained)
	}()
	if err := server.Serve(listener); err != http.ErrServerClosed {
		fmt.Fprintf(os.Stderr, "go-peer: %v\n", err)
		os.Exit(1)
	}
	<-drained
}
