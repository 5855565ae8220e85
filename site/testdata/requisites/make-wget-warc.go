//go:build ignore

// make-wget-warc.go regenerates wget.warc.gz, the WARC file GNU wget wrote
// when it mirrored the small web in web/ with --page-requisites, which
// TestCrawlWgetWARCRequisites replays and crawls. Run it from this
// directory with GNU wget on the PATH:
//
//	go run make-wget-warc.go
//
// It serves web/<host>/ for each host as an HTTP proxy on a loopback port
// (so the archived URLs name the hosts www.wget.test and static.wget.test
// and port 18411, whatever port it got) and runs wget through it.
package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
)

const front = "http://www.wget.test:18411/"

func main() {
	web, err := filepath.Abs("web")
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.URL.Hostname() // a proxy request names its URL in full
		if host == "" {
			host, _, _ = net.SplitHostPort(r.Host)
		}
		dir := filepath.Join(web, filepath.Base(host))
		if _, err := os.Stat(dir); err != nil {
			http.NotFound(w, r)
			return
		}
		http.FileServer(http.Dir(dir)).ServeHTTP(w, r)
	}))
	tmp, err := os.MkdirTemp("", "wget-mirror")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("wget", "--mirror", "--page-requisites", "--span-hosts", "--domains=wget.test",
		"-e", "robots=off", "--no-verbose", "--no-warc-keep-log", "--warc-file="+filepath.Join(tmp, "wget"),
		"--directory-prefix="+filepath.Join(tmp, "mirror"), front)
	cmd.Env = append(os.Environ(), "http_proxy=http://"+ln.Addr().String()+"/", "no_proxy=")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("wget: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(tmp, "wget.warc.gz"))
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("wget.warc.gz", b, 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("wrote wget.warc.gz (%d bytes)\n", len(b))
}
