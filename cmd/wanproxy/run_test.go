package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseLink(t *testing.T) {
	l, err := parseLink("eu=127.0.0.1:0>127.0.0.1:7101", 40*time.Millisecond, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if l.Name != "eu" || l.Listen != "127.0.0.1:0" || l.Upstream != "127.0.0.1:7101" ||
		l.Delay != 40*time.Millisecond || l.Jitter != 5*time.Millisecond {
		t.Errorf("parsed %+v", l)
	}
	for _, bad := range []string{"", "eu", "eu=127.0.0.1:0", "=a>b", "eu=>b", "eu=a>"} {
		if _, err := parseLink(bad, 0, 0); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "links.json")
	data := `{"links": [
		{"name": "eu", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:7101"},
		{"name": "us", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:7102", "delay": "80ms", "jitter": "1ms"}]}`
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	links, err := loadConfig(path, 20*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != 2 || links[0].Delay != 20*time.Millisecond || links[1].Delay != 80*time.Millisecond || links[1].Jitter != time.Millisecond {
		t.Errorf("loaded %+v", links)
	}
	if err := os.WriteFile(path, []byte(`{"links": [{"name": "eu", "delay": "soon"}], "extra": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(path, 0, 0); err == nil {
		t.Error("unknown field: no error")
	}
}

func TestRunServesLinksStatsAndDelay(t *testing.T) {
	const delay = 15 * time.Millisecond
	echo := startEcho(t)
	ready := filepath.Join(t.TempDir(), "ready")
	stop := runCmd(t, "--link", "eu=127.0.0.1:0>"+echo, "--delay", delay.String(),
		"--stats", "127.0.0.1:0", "--ready-file", ready)
	text := waitForFile(t, ready)
	name, listen := field(text, "link")
	statsURL, _ := field(text, "stats")
	if name != "eu" || listen == "" || statsURL == "" || !strings.HasSuffix(text, "ready\n") {
		t.Fatalf("ready file:\n%s", text)
	}

	if rtt := echoRoundTrip(t, listen); rtt < 2*delay-time.Millisecond {
		t.Errorf("round trip %v, want at least %v", rtt, 2*delay)
	}
	var rep statsReport
	getJSON(t, http.MethodGet, statsURL, &rep)
	if len(rep.Links) != 1 || rep.Links[0].UpstreamBytes != 5 || rep.Links[0].DownstreamBytes != 5 ||
		rep.Links[0].Conns != 1 || rep.Links[0].Delay != delay.String() {
		t.Errorf("stats: %+v", rep)
	}

	const higher = 50 * time.Millisecond
	base := strings.TrimSuffix(statsURL, "/stats")
	getJSON(t, http.MethodPost, base+"/delay?delay="+higher.String(), &rep)
	if rep.Links[0].Delay != higher.String() {
		t.Errorf("after POST /delay: %+v", rep)
	}
	if rtt := echoRoundTrip(t, listen); rtt < 2*higher-time.Millisecond {
		t.Errorf("round trip after POST /delay %v, want at least %v", rtt, 2*higher)
	}
	resp, err := client.Post(base+"/delay?link=mars&delay=1ms", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("POST /delay for an unknown link: %s", resp.Status)
	}

	out, err := stop()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "bytes eu upstream=10 downstream=10 conns=2") {
		t.Errorf("output lacks the final byte counts:\n%s", out)
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--link", "nonsense"},
		{"--link", "eu=127.0.0.1:0>127.0.0.1:1", "--delay", "1ms", "--jitter", "2ms"},
	} {
		if out, err := runCmd(t, args...)(); err == nil {
			t.Errorf("%q: no error; output:\n%s", args, out)
		}
	}
}

// client keeps no connections open between tests.
var client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

// getJSON sends a request without a body and decodes the JSON answer.
func getJSON(t *testing.T, method, url string, v any) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s", method, url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
