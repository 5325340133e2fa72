package capture_test

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// startNginx runs nginx as a reverse proxy in front of upstream (a child
// process, stopped when b ends) and returns its base URL; b is skipped when
// nginx is not installed. Its configuration is what streaming LLM traffic
// needs: HTTP/1.1 keep-alive to the upstream, no response or request
// buffering (each upstream read is sent on at once), no access log.
func startNginx(b *testing.B, upstream string, streams int) string {
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
	dir := b.TempDir()
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
`, dir, u.Host, addr, 4*streams+64, streams)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "-e", filepath.Join(dir, "error.log"), "-p", dir, "-c", "nginx.conf", "-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting nginx: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) // fast shutdown
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			b.Fatalf("nginx exited: %v\n%s%s", waitErr, out.Bytes(), log)
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			b.Fatalf("nginx did not listen on %s within 10 s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
