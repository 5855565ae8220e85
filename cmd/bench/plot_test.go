package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlotCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	part := write("partition.json", `{"benchmark":"partition","result":{"sets":[{"name":"3 sites","consistent":[{"replicas":100,"ring_max_dev_pct":1.5},{"replicas":200,"ring_max_dev_pct":0.8}]}]}}`)
	site := write("site.json", `{"benchmark":"site","result":{"pages_per_sec":10,"rounds":[{"round":1,"start_s":0,"end_s":3,"generate_s":0.1,"fetch_s":2,"update_s":1,"fetched":20}]}}`)
	sim := write("websim.json", `{"benchmark":"websim","result":{}}`)
	geo := write("geo.json", `{"benchmark":"federation","result":{"geo":{"wan_delay_ms":71},"runs":[{"mode":"federated","geo":"distance",`+
		`"exit":"exhausted","window_s":100,"floor":{"s":94},"fetch":{"requests":10,"mean_ms":30,"p95_ms":90},"wan_bytes_per_page":40}]}}`)
	var out, errOut bytes.Buffer
	if err := run([]string{"plot", part, site, sim, geo}, &out, &errOut); err != nil {
		t.Fatalf("bench plot: %v\n%s", err, errOut.String())
	}
	for _, name := range []string{"partition-3-sites.svg", "site-pages.svg", "site-phases.svg", "geo-exhaustion.svg", "geo-latency.svg", "geo-wan-bytes.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.HasPrefix(b, []byte("<svg ")) {
			t.Errorf("%s: %v, %.20q", name, err, b)
		}
	}
	if !strings.Contains(errOut.String(), "websim.json: nothing to plot") {
		t.Errorf("stderr %q does not say that websim has no plots", errOut.String())
	}

	other := t.TempDir()
	if err := run([]string{"plot", "--out", other, part}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(other, "partition-3-sites.svg")); err != nil {
		t.Error(err)
	}

	bad := write("bad.json", `{"benchmark":"nope"}`)
	if err := run([]string{"plot", bad}, &out, &errOut); err == nil {
		t.Error("bench plot of an unknown benchmark: no error")
	}
	if err := run([]string{"plot"}, &out, &errOut); err == nil {
		t.Error("bench plot without files: no error")
	}
}
