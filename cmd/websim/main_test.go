package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func run(args ...string) (string, error) {
	var out bytes.Buffer
	root := newRoot(&out, &out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestBadInput(t *testing.T) {
	l, err := net.Listen("tcp", "127.77.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.warc")
	os.WriteFile(garbage, []byte("WARC/1.1\r\nnonsense\r\n\r\n"), 0o644)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"serve", "--bogus"}, "unknown flag: --bogus"},
		{"not a number", []string{"serve", "--hosts", "many"}, "invalid argument \"many\" for \"--hosts\""},
		{"negative hosts", []string{"serve", "--hosts", "-3", "--port", "0"}, "hosts must be in [1,"},
		{"bad profile", []string{"serve", "--profile", "nasty"}, "unknown profile \"nasty\""},
		{"bad port", []string{"serve", "--port", "70000"}, "--port must be in [0, 65535]"},
		{"bad ip base", []string{"serve", "--ip-base", "10.0.0.1", "--port", "0"}, "127.0.0.0/8"},
		{"bad log level", []string{"serve", "--log-level", "loud"}, "--log-level"},
		{"port in use", []string{"serve", "--port", busy, "--ips", "1", "--hosts", "3"}, "address already in use"},
		{"bad dns addr", []string{"serve", "--port", "0", "--dns", "nowhere"}, "dns address \"nowhere\""},
		{"replay without files", []string{"replay"}, "at least one file"},
		{"unreadable warc", []string{"replay", "--warc", filepath.Join(dir, "missing.warc.gz")}, "missing.warc.gz"},
		{"garbage warc", []string{"replay", "--warc", garbage, "--port", "0"}, "garbage.warc"},
		{"unknown command", []string{"crawl"}, "unknown command \"crawl\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(c.args...)
			if err == nil {
				t.Fatalf("%v: no error (output %q)", c.args, out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v: error %q lacks %q", c.args, err, c.want)
			}
		})
	}
}

// TestBinary builds websim and runs it as an operator would: a bad flag
// exits non-zero with a message; serve answers and stops on SIGTERM.
func TestBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "websim")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "serve", "--hosts", "0x").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.HasPrefix(string(out), "websim: invalid argument") {
		t.Fatalf("bad flag: %v, output %q", err, out)
	}

	ready := filepath.Join(dir, "ready")
	var stdout bytes.Buffer
	cmd := exec.Command(bin, "serve", "--hosts", "5", "--pages", "3", "--port", "0", "--ips", "2",
		"--dns", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--ready-file", ready, "--truth", filepath.Join(dir, "t.jsonl"))
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var info string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			info = string(b)
			break
		}
	}
	var port int
	var dns, admin string
	if _, err := fmt.Sscanf(info, "ready port=%d dns=%s admin=%s", &port, &dns, &admin); err != nil {
		t.Fatalf("ready file %q: %v\n%s", info, err, stdout.String())
	}
	resp, err := http.Get("http://" + admin + "/_websim/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(b), fmt.Sprintf("ok port=%d", port)) {
		t.Fatalf("health: %q", b)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, stdout.String())
	}
	if !strings.Contains(stdout.String(), "websim: stopping") {
		t.Fatalf("output: %s", stdout.String())
	}
}
