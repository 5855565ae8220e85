package crawldb

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/meridian-crawler/meridian/crawldb/store"
)

// apiNode opens a one-node database on Raft's in-memory transport with a
// few URLs, to drive its API handler without a network.
func apiNode(tb testing.TB) *DB {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	db, err := Open(ctx, Options{Dir: tb.TempDir(), NodeID: "n1", Transport: newInmem("n1"), FastTimeouts: true, NoSync: true,
		SnapshotThreshold: 1 << 30, SnapshotInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if err := db.WaitLeader(ctx); err != nil {
		tb.Fatal(err)
	}
	for db.raft.State().String() != "Leader" {
		time.Sleep(5 * time.Millisecond)
	}
	if res, err := db.Apply(ctx, upserts(0, 10, 1)); err != nil || res.Err != nil {
		tb.Fatal(err, res)
	}
	return db
}

// apiState is what a refused request must leave as it was.
type apiState struct {
	Applied uint64
	Counts  string
	Members string
}

func apiStateOf(tb testing.TB, db *DB) apiState {
	m, err := db.Members()
	if err != nil {
		tb.Fatal(err)
	}
	return apiState{db.Store().AppliedIndex(), fmt.Sprintf("%+v", db.Store().Counts()), fmt.Sprint(m)}
}

// serve sends one request to db's API handler.
func serve(db *DB, path string, body io.Reader, contentLength int64) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, body)
	req.ContentLength = contentLength
	rec := httptest.NewRecorder()
	db.APIHandler().ServeHTTP(rec, req)
	return rec
}

// checkRefused asserts a 4xx whose message starts with prefix, and db's
// state as it was.
func checkRefused(tb testing.TB, db *DB, rec *httptest.ResponseRecorder, prefix string, before apiState) {
	tb.Helper()
	if rec.Code < 400 || rec.Code > 499 || !strings.HasPrefix(rec.Body.String(), prefix) {
		tb.Fatalf("answer %d %q; want a 4xx starting %q", rec.Code, rec.Body.String(), prefix)
	}
	if after := apiStateOf(tb, db); after != before {
		tb.Fatalf("a refused request changed the node: %+v → %+v", before, after)
	}
}

func validCommand(tb testing.TB) []byte {
	cmd, err := upserts(100, 3, 1).Encode()
	if err != nil {
		tb.Fatal(err)
	}
	return cmd
}

// FuzzAPIApply posts bodies to /crawldb/apply: any that is not a valid
// command is refused with 400 or 413 and a message, and changes nothing.
func FuzzAPIApply(f *testing.F) {
	cmd := validCommand(f)
	f.Add([]byte{})
	f.Add([]byte("not a command at all"))
	f.Add(cmd[:len(cmd)/2])                       // truncated
	f.Add(cmd[:len(cmd)-1])                       // one byte short
	f.Add(append(cmd, 0))                         // one byte long
	f.Add(append([]byte{cmd[0] ^ 1}, cmd[1:]...)) // bad magic
	flipped := bytes.Clone(cmd)
	flipped[len(flipped)/2] ^= 0x40 // checksum fails
	f.Add(flipped)
	db := apiNode(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		if store.CheckCommand(body) == nil {
			t.Skip("a valid command is applied")
		}
		before := apiStateOf(t, db)
		rec := serve(db, "/crawldb/apply", bytes.NewReader(body), int64(len(body)))
		checkRefused(t, db, rec, "crawldb: apply: ", before)
	})
}

// FuzzAPIMembership posts bodies to /crawldb/join and /crawldb/leave: any
// that is not exactly one well-formed request is refused with 400 or 413
// and a message, and changes nothing.
func FuzzAPIMembership(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `"n2"`, `{"id":"n2"`, `{"id":"n2"}{"id":"n3"}`, `{"id":"n2"} x`,
		`{"id":"n2","raft_addr":"127.0.0.1:7001","api_addr":"127.0.0.1:8001"}`, // valid join: skipped
		`{"id":"n2","raft_addr":"127.0.0.1:7001","api_addr":"127.0.0.1:8001","extra":1}`,
		`{"id":"n2","raft_addr":"127.0.0.1:7001"}`,
		`{"id":"n 2","raft_addr":"127.0.0.1:7001","api_addr":"127.0.0.1:8001"}`,
		`{"id":"n2","raft_addr":"0.0.0.0:7001","api_addr":"127.0.0.1:8001"}`,
		`{"id":"n2","raft_addr":"127.0.0.1:0","api_addr":"127.0.0.1"}`,
		`{"id":2,"raft_addr":true,"api_addr":[]}`,
		`{"ID":"n2","Raft_Addr":"127.0.0.1:7001","API_ADDR":"127.0.0.1:8001"}`, // case-insensitive names: accepted by encoding/json
		`{"id":"n2/../n1"}`,
		"\xff\xfe{}",
		`{"id":"` + strings.Repeat("x", 5000) + `"}`, // too large
	} {
		f.Add(uint8(0), []byte(s))
		f.Add(uint8(1), []byte(s))
	}
	db := apiNode(f)
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path, what := "/crawldb/join", "join"
		var req interface{ validate() error } = &joinRequest{}
		if which%2 == 1 {
			path, what, req = "/crawldb/leave", "leave", &leaveRequest{}
		}
		if len(body) <= maxMemberBody && decodeJSON(body, req) == nil && req.validate() == nil {
			t.Skip("a valid request changes the group")
		}
		before := apiStateOf(t, db)
		rec := serve(db, path, bytes.NewReader(body), int64(len(body)))
		checkRefused(t, db, rec, "crawldb: "+what+": want JSON", before)
	})
}

// errReader fails after its bytes, as a request body whose connection
// closed early.
type errReader struct{ r io.Reader }

func (e errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// TestAPIRejectsBadBodies: truncated, oversized (declared or streamed) and
// malformed bodies of every write path get a 4xx with a message and change
// nothing.
func TestAPIRejectsBadBodies(t *testing.T) {
	db := apiNode(t)
	cmd := validCommand(t)
	join, _ := json.Marshal(joinRequest{ID: "n2", RaftAddr: "127.0.0.1:7001", APIAddr: "127.0.0.1:8001"})
	for _, tc := range []struct {
		name, path string
		body       io.Reader
		length     int64 // Content-Length; -1: unknown (chunked)
		code       int
		want       string
	}{
		{"apply truncated", "/crawldb/apply", errReader{bytes.NewReader(cmd[:20])}, int64(len(cmd)), 400, "crawldb: apply: read body: unexpected EOF"},
		{"apply declared too large", "/crawldb/apply", strings.NewReader("x"), store.MaxCommandBytes + 1, 413, "crawldb: apply: body too large"},
		{"apply streamed too large", "/crawldb/apply", io.LimitReader(zeros{}, store.MaxCommandBytes+5), -1, 413, "crawldb: apply: body too large"},
		{"apply garbage", "/crawldb/apply", strings.NewReader("GET / HTTP/1.0"), -1, 400, "crawldb: apply: store: corrupt command"},
		{"join truncated", "/crawldb/join", errReader{bytes.NewReader(join[:10])}, int64(len(join)), 400, "crawldb: join: want JSON {id, raft_addr, api_addr}: read body: unexpected EOF"},
		{"join too large", "/crawldb/join", bytes.NewReader(append(join, bytes.Repeat([]byte(" "), 5000)...)), -1, 413, "crawldb: join: want JSON {id, raft_addr, api_addr}: body too large"},
		{"join unknown field", "/crawldb/join", strings.NewReader(`{"id":"n2","raft_addr":"127.0.0.1:7001","api_addr":"127.0.0.1:8001","voter":false}`), -1, 400, `unknown field "voter"`},
		{"join trailing data", "/crawldb/join", bytes.NewReader(append(join, join...)), -1, 400, "data after the JSON object"},
		{"join bad fields", "/crawldb/join", strings.NewReader(`{"id":"a b","raft_addr":"x","api_addr":"0.0.0.0:80"}`), -1, 400,
			`id "a b" must be non-empty without spaces or slashes` + "\n" + `raft_addr "x" must be host:port` + "\n" + `api_addr "0.0.0.0:80" must name a host, not a wildcard`},
		{"leave empty", "/crawldb/leave", strings.NewReader(``), 0, 400, "crawldb: leave: want JSON {id}: EOF"},
		{"leave truncated", "/crawldb/leave", strings.NewReader(`{"id":"n`), -1, 400, "crawldb: leave: want JSON {id}: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := apiStateOf(t, db)
			rec := serve(db, tc.path, tc.body, tc.length)
			if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("answer %d %q; want %d with %q", rec.Code, rec.Body.String(), tc.code, tc.want)
			}
			checkRefused(t, db, rec, "crawldb: ", before)
		})
	}
	// And a valid apply through the same path still works.
	rec := serve(db, "/crawldb/apply", bytes.NewReader(cmd), int64(len(cmd)))
	var out wireResult
	if err := json.Unmarshal(rec.Body.Bytes(), &out); rec.Code != 200 || err != nil || out.Err != "" || len(out.Ops) != 3 {
		t.Fatalf("valid apply: %d %s", rec.Code, rec.Body)
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
