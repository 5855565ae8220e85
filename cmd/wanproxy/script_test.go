package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// script is scripts/wan.sh, from this package's directory.
const script = "../../scripts/wan.sh"

// fakeBin makes a directory holding an ip that succeeds at everything and a
// tc that fails when one of its arguments is failOn ("": never), for the
// probe to find first.
func fakeBin(t *testing.T, failOn string) string {
	t.Helper()
	dir := t.TempDir()
	tc := "#!/bin/sh\nfor a; do\n\tif [ \"$a\" = \"" + failOn + "\" ]; then\n" +
		"\t\techo 'Error: Specified qdisc kind is unknown.' >&2\n\t\texit 2\n\tfi\ndone\n"
	files := map[string]string{"ip": "#!/bin/sh\nexit 0\n", "tc": tc}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runScript runs wan.sh to the end with PATH set to path ("" leaves it).
func runScript(t *testing.T, path string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	bash, lookErr := exec.LookPath("bash")
	if lookErr != nil {
		t.Skip("no bash")
	}
	cmd := exec.Command(bash, append([]string{script}, args...)...)
	cmd.Env = os.Environ()
	if path != "" {
		cmd.Env = append(cmd.Env, "PATH="+path)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// TestScriptProbeChoosesMode checks wan.sh's choice between netem and the
// proxy, with stand-ins for ip and tc that make netem work or fail.
func TestScriptProbeChoosesMode(t *testing.T) {
	withNetem := fakeBin(t, "") + ":" + os.Getenv("PATH")
	withoutNetem := fakeBin(t, "netem") + ":" + os.Getenv("PATH")
	withoutPrio := fakeBin(t, "prio") + ":" + os.Getenv("PATH")
	cases := []struct {
		name, path string
		args       []string
		want       string // stdout; "" when the script must fail
		reason     string // in stderr
	}{
		{"netem works", withNetem, []string{"--probe"}, "netem", "has sch_netem"},
		{"no netem", withoutNetem, []string{"--probe"}, "proxy", "no sch_netem"},
		{"netem but no prio", withoutPrio, []string{"--probe"}, "proxy", "no sch_prio"},
		{"no iproute2", t.TempDir(), []string{"--probe"}, "proxy", "no ip/tc"},
		{"proxy forced", withNetem, []string{"--mode", "proxy", "--probe"}, "proxy", "requested"},
		{"netem forced, missing", withoutNetem, []string{"--mode", "netem", "--probe"}, "", "netem mode requested, but the kernel has no sch_netem"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, err := runScript(t, c.path, c.args...)
			if c.want == "" {
				if err == nil {
					t.Errorf("succeeded; stdout %q", out)
				}
			} else if err != nil || strings.TrimSpace(out) != c.want {
				t.Errorf("stdout %q, err %v; want %q", out, err, c.want)
			}
			if !strings.Contains(errOut, c.reason) {
				t.Errorf("stderr %q does not say %q", errOut, c.reason)
			}
		})
	}

	// This machine, for real: whichever it is, the answer is one of the two.
	out, errOut, err := runScript(t, "", "--probe")
	if got := strings.TrimSpace(out); err != nil || (got != "netem" && got != "proxy") {
		t.Fatalf("real probe: stdout %q, stderr %q, %v", out, errOut, err)
	}
	t.Logf("this machine: %s (%s)", strings.TrimSpace(out), strings.TrimSpace(errOut))
}

// quickRaceExit returns a GORACE setting under which a race-enabled test
// binary, run as wanproxy, exits at once rather than after the race
// detector's default second.
func quickRaceExit() string {
	return "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")
}

// endpoints is the script's DIR/endpoints.json.
type endpoints struct {
	Mode  string `json:"mode"`
	Delay string `json:"delay"`
	Sites []struct {
		Name, Listen, Dial, Netns string
	} `json:"sites"`
}

// TestScriptProxyModeDelaysSiteTraffic sets up the proxy WAN between two
// sites, checks that a round trip to a site through it pays twice the delay,
// then stops the script with SIGTERM and checks that it stopped its proxy.
func TestScriptProxyModeDelaysSiteTraffic(t *testing.T) {
	const delay = 20 * time.Millisecond
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sites := map[string]string{"a": startEcho(t), "b": startEcho(t)}
	dir := t.TempDir()
	cmd := exec.Command(bash, script, "--mode", "proxy", "--delay", delay.String(), "--dir", dir,
		"--site", "a="+sites["a"], "--site", "b="+sites["b"])
	cmd.Env = append(os.Environ(), "WANPROXY="+self, asMainEnv+"=1", quickRaceExit())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	})

	var ep endpoints
	if err := json.Unmarshal([]byte(waitForFile(t, filepath.Join(dir, "endpoints.json"))), &ep); err != nil {
		t.Fatal(err)
	}
	if ep.Mode != "proxy" || ep.Delay != delay.String() || len(ep.Sites) != 2 {
		t.Fatalf("endpoints: %+v", ep)
	}
	for _, s := range ep.Sites {
		if s.Listen != sites[s.Name] || s.Dial == s.Listen || s.Netns != "" {
			t.Errorf("site %+v: want listen %s and another dial address", s, sites[s.Name])
		}
		if rtt := echoRoundTrip(t, s.Dial); rtt < 2*delay-time.Millisecond {
			t.Errorf("site %s: round trip %v, want at least %v", s.Name, rtt, 2*delay)
		}
	}
	pidText, err := os.ReadFile(filepath.Join(dir, "wanproxy.pid"))
	if err != nil {
		t.Fatal(err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Errorf("script exited with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("script still running 15 s after SIGTERM")
	}
	text := out.String()
	for _, want := range []string{"WAN mode: PROXY", "bytes a upstream=5 downstream=5 conns=1", "bytes b upstream=5", "WAN torn down"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("wanproxy (pid %d) still there after the script stopped: %v", pid, err)
	}
}

// TestScriptRunsCommandPerSite runs a short command per site: the script
// gives each its settings, ends when they have, and reports a failure.
func TestScriptRunsCommandPerSite(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("WANPROXY", self)
	t.Setenv(asMainEnv, "1")
	t.Setenv("GORACE", strings.TrimPrefix(quickRaceExit(), "GORACE="))
	dir := t.TempDir()
	run := `echo "$WAN_SITE $WAN_LISTEN $WAN_MODE $WAN_HOST" >"$WAN_DIR/$WAN_SITE.out"`
	out, errOut, err := runScript(t, "", "--mode", "proxy", "--dir", dir,
		"--site", "a=127.0.0.1:7101", "--site", "b=127.0.0.2:7102", "--run", run)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, out, errOut)
	}
	for name, want := range map[string]string{"a": "a 127.0.0.1:7101 proxy 127.0.0.1\n", "b": "b 127.0.0.2:7102 proxy 127.0.0.1\n"} {
		got, err := os.ReadFile(filepath.Join(dir, name+".out"))
		if err != nil || string(got) != want {
			t.Errorf("site %s's command wrote %q (%v), want %q", name, got, err, want)
		}
	}

	if out, errOut, err := runScript(t, "", "--mode", "proxy", "--dir", dir, "--site", "a=127.0.0.1:7101", "--run", "exit 3"); err == nil {
		t.Errorf("a failing command: script succeeded\n%s%s", out, errOut)
	}
	if _, errOut, err := runScript(t, "", "--mode", "proxy", "--dir", dir, "--site", "a=10.0.0.1:7101"); err == nil ||
		!strings.Contains(errOut, "loopback only") {
		t.Errorf("a non-loopback site: %v, %s", err, errOut)
	}
}
