package capture_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childProxy is a reverse proxy under test running as a child process, so
// that it has its own scheduler and heap, as it would in production.
type childProxy struct {
	url, dir string
	cmd      *exec.Cmd
	out      bytes.Buffer // stderr (and nginx's stdout)
	exited   chan struct{}
	waitErr  error
}

func (c *childProxy) start(b *testing.B) {
	b.Helper()
	if err := c.cmd.Start(); err != nil {
		b.Fatalf("starting %s: %v", c.cmd.Path, err)
	}
	c.exited = make(chan struct{})
	go func() { c.waitErr = c.cmd.Wait(); close(c.exited) }()
	b.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			c.cmd.Process.Kill()
			<-c.exited
		}
	})
}

// stop interrupts the proxy (nginx: fast shutdown; tracekit: Close, which
// completes its files), waits for it and returns its peak resident set
// (nginx: its largest process's), in bytes.
func (c *childProxy) stop() (int64, error) {
	c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.exited:
	case <-time.After(60 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
		return 0, fmt.Errorf("%s did not exit within 60 s of SIGINT", c.cmd.Path)
	}
	if c.waitErr != nil {
		return 0, fmt.Errorf("%s: %w\n%s", c.cmd.Path, c.waitErr, c.out.Bytes())
	}
	if ru, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10, nil // KiB on Linux
	}
	return 0, nil
}

// startProxyChild re-executes this test binary as a capture proxy
// (TestMain's TRACEKIT_PROXY_CHILD) with its default settings; its files
// go to dir.
func startProxyChild(b *testing.B, upstream string) *childProxy {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	return startProxyChildExe(b, exe, upstream)
}

// startProxyChildExe runs exe, a capture test binary (this one or another
// build's), as a capture proxy child in front of upstream.
func startProxyChildExe(b *testing.B, exe, upstream string) *childProxy {
	c := &childProxy{dir: b.TempDir()}
	c.cmd = exec.Command(exe, "-test.run=^$")
	c.cmd.Env = append(os.Environ(), "TRACEKIT_PROXY_CHILD="+c.dir, "TRACEKIT_PROXY_UPSTREAM="+upstream, "TRACEKIT_PROXY_BENCH=1")
	c.cmd.Stderr = &c.out
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	c.start(b)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		b.Fatalf("proxy child said %q (%v)", line, err)
	}
	c.url = strings.TrimSpace(line)
	return c
}

// recordings lists the recordings a stopped tracekit child wrote.
func (c *childProxy) recordings() ([]string, error) {
	return filepath.Glob(filepath.Join(c.dir, "*.recording.parquet"))
}

// startNginx runs nginx as a reverse proxy in front of upstream; b is
// skipped when nginx is not installed. Its configuration is what streaming
// LLM traffic needs: HTTP/1.1 keep-alive to the upstream, no response or
// request buffering (each upstream read is sent on at once), no access log.
func startNginx(b *testing.B, upstream string, streams int) *childProxy {
	b.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			b.Skip("nginx is not installed")
		}
		bin = "/usr/sbin/nginx"
	}
	u, err := url.Parse(upstream)
	if err != nil {
		b.Fatal(err)
	}
	// A free loopback port: taken, then released for nginx to bind.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := &childProxy{dir: b.TempDir(), url: "http://" + addr}
	conf := fmt.Sprintf(`worker_processes auto;
worker_rlimit_nofile %[4]d;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections %[4]d; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	upstream mock {
		server %[2]s;
		keepalive %[5]d;
	}
	server {
		listen %[3]s;
		location / {
			proxy_pass http://mock;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;
			proxy_request_buffering off;
			proxy_read_timeout 300s;
		}
	}
}
`, c.dir, u.Host, addr, 4*streams+64, streams)
	if err := os.WriteFile(filepath.Join(c.dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	c.cmd = exec.Command(bin, "-e", filepath.Join(c.dir, "error.log"), "-p", c.dir, "-c", "nginx.conf", "-g", "daemon off;")
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	c.start(b)
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case <-c.exited:
			log, _ := os.ReadFile(filepath.Join(c.dir, "error.log"))
			b.Fatalf("nginx exited: %v\n%s%s", c.waitErr, c.out.Bytes(), log)
		default:
		}
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			return c
		}
		if time.Now().After(deadline) {
			b.Fatalf("nginx did not listen on %s within 10 s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procStat is what the kernel counted for a proxy and its child processes
// (nginx's workers) so far: CPU time, read(2)/write(2)-family system calls
// (/proc/<pid>/io syscr + syscw, which the kernel counts in read, pread,
// readv, write, pwrite and writev only: recv, recvfrom, send, sendmsg and
// epoll are not in it, so a proxy that reads its sockets with recv counts
// its writes alone; perfSyscalls counts every call) and context switches
// of all their threads (a thread that sleeps and is woken counts one):
// Linux only, zeros elsewhere.
type procStat struct {
	cpu             time.Duration
	rwCalls, wakeup int64
}

func (c *childProxy) stat() procStat { return procStats(c.cmd.Process.Pid) }

// pids are the proxy's process and its child processes (nginx's workers).
func (c *childProxy) pids() []int {
	pid := c.cmd.Process.Pid
	out := []int{pid}
	kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, k := range strings.Fields(string(kids)) {
		var kp int
		if _, err := fmt.Sscan(k, &kp); err == nil {
			out = append(out, kp)
		}
	}
	return out
}

// perfSyscalls counts every system call of some processes (perf stat on
// the raw_syscalls:sys_enter tracepoint, their later threads included)
// from start to stop: nil where perf is not installed or may not trace.
type perfSyscalls struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

func startPerfSyscalls(pids []int) *perfSyscalls {
	bin, err := exec.LookPath("perf")
	if err != nil {
		return nil
	}
	list := make([]string, len(pids))
	for i, p := range pids {
		list[i] = strconv.Itoa(p)
	}
	ps := &perfSyscalls{}
	ps.cmd = exec.Command(bin, "stat", "-x,", "-e", "raw_syscalls:sys_enter", "-p", strings.Join(list, ","))
	ps.cmd.Stdout, ps.cmd.Stderr = &ps.out, &ps.out
	if err := ps.cmd.Start(); err != nil {
		return nil
	}
	time.Sleep(300 * time.Millisecond) // attached by then
	return ps
}

// stop ends the count and returns it; false when perf counted nothing
// (it could not attach or trace).
func (ps *perfSyscalls) stop() (int64, bool) {
	if ps == nil {
		return 0, false
	}
	ps.cmd.Process.Signal(os.Interrupt)
	ps.cmd.Wait()
	for _, line := range strings.Split(ps.out.String(), "\n") {
		f := strings.Split(line, ",")
		if len(f) >= 3 && f[2] == "raw_syscalls:sys_enter" {
			n, err := strconv.ParseInt(f[0], 10, 64)
			return n, err == nil && n > 0
		}
	}
	return 0, false
}

func procStats(pid int) procStat {
	s := procStat{cpu: procCPU(pid)}
	s.addIO(pid)
	kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, k := range strings.Fields(string(kids)) {
		var kp int
		if _, err := fmt.Sscan(k, &kp); err == nil {
			s.addIO(kp)
		}
	}
	return s
}

// addIO adds one process's system calls and its threads' context switches.
func (s *procStat) addIO(pid int) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ": ")
			if k == "syscr" || k == "syscw" {
				var n int64
				fmt.Sscan(v, &n)
				s.rwCalls += n
			}
		}
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			if k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches" {
				var n int64
				fmt.Sscan(strings.TrimSpace(v), &n)
				s.wakeup += n
			}
		}
	}
}

// procCPU is the CPU time a process and its child processes (nginx's
// workers) have used so far, from /proc (Linux; 0 elsewhere), at the
// kernel's 100 Hz tick.
func procCPU(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command: state is field 3, utime 14,
	// stime 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0
	}
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	total := time.Duration(ut+st) * 10 * time.Millisecond
	kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, k := range strings.Fields(string(kids)) {
		var kp int
		if _, err := fmt.Sscan(k, &kp); err == nil {
			total += procCPU(kp)
		}
	}
	return total
}
