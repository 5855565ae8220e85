package replay

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"
)

const (
	// maxDrain is the largest request body read and discarded to keep a
	// connection usable; a larger body closes the connection after the
	// response.
	maxDrain = 256 << 10
	// maxHead bounds the header section of a stored HTTP response.
	maxHead = 1 << 20
	// lingerTime is how long a closing connection keeps reading the client's
	// unread data, so that closing does not reset the connection before the
	// client has read the response (as net/http does).
	lingerTime = 500 * time.Millisecond
)

// ServeHTTP answers r with the response recorded for its URL:
// "http://" + r.Host + r.RequestURI (https:// for TLS requests, and the full
// request target for absolute-form proxy requests). If that URL is not
// indexed, the other scheme and then the host without its port are tried.
// An unknown URL gets a 404 with a short text body; after Close every
// request gets a 503.
//
// The stored response is sent verbatim: ServeHTTP hijacks the HTTP/1.x
// connection and writes the recorded status line, headers and body bytes as
// they are, so clients see exactly the recorded header order, header case,
// reason phrase and chunking (a HEAD request gets the header section only).
// If the stored response delimits itself (a
// Content-Length that matches the stored body, a well-formed chunked body,
// or a status without body) and neither it nor the request asks to close,
// the connection stays open and ServeHTTP goes on answering the next
// requests on it itself, pipelined ones included. Those later requests
// therefore bypass any handler that wraps the Archive. Otherwise the
// connection is closed after the response, so the client reads the body
// until EOF. Idle timeouts of the http.Server (IdleTimeout, else
// ReadTimeout) and its WriteTimeout apply to the connections taken over.
//
// ServeHTTP hijacks only if w itself is an http.Hijacker; it does not look
// through wrappers (no http.ResponseController, no Unwrap). So a middleware
// that wraps w without exposing Hijack, for example to record status codes,
// keeps seeing every request and its status: ServeHTTP then answers as
// ServeParsed does. The same fallback applies to HTTP/2.
func (a *Archive) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	end := a.observed(r)
	if a.closed.Load() {
		http.Error(w, ErrClosed.Error(), http.StatusServiceUnavailable)
		end(http.StatusServiceUnavailable)
		return
	}
	e, url := a.find(r)
	if e == nil {
		http.Error(w, notFoundText(url), http.StatusNotFound)
		end(http.StatusNotFound)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok || r.ProtoMajor != 1 {
		a.serveParsed(w, r, e)
		end(e.status)
		return
	}
	hijacked := false
	defer func() {
		if !hijacked {
			end(e.status)
		}
	}()
	// The request body must be consumed before hijacking; net/http answers
	// "Expect: 100-continue" while it is read.
	if r.ContentLength != 0 && r.Body != nil {
		n, err := io.Copy(io.Discard, io.LimitReader(r.Body, maxDrain+1))
		if err != nil || n > maxDrain {
			a.serveParsed(w, r, e)
			return
		}
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		a.serveParsed(w, r, e)
		return
	}
	if !a.track(conn) {
		_ = conn.Close()
		return
	}
	defer a.untrack(conn)
	hijacked = true
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	a.serveConn(conn, rw, r, e, url, srv, end)
}

// ServeParsed answers r like ServeHTTP but through net/http, without
// hijacking: it parses the stored response with http.ReadResponse and copies
// status code, headers and body into w. The body reaches the client byte for
// byte (a chunked body is decoded and re-chunked by net/http) and so do the
// header values, but header order and the reason phrase are net/http's, and
// Transfer-Encoding is net/http's choice. No Date or Content-Type header is
// added that the recording lacks. Use it where later requests on a
// connection must keep passing through other handlers.
func (a *Archive) ServeParsed(w http.ResponseWriter, r *http.Request) {
	if a.closed.Load() {
		http.Error(w, ErrClosed.Error(), http.StatusServiceUnavailable)
		return
	}
	e, url := a.find(r)
	if e == nil {
		http.Error(w, notFoundText(url), http.StatusNotFound)
		return
	}
	a.serveParsed(w, r, e)
}

// serveParsed writes the response of e to w through net/http.
func (a *Archive) serveParsed(w http.ResponseWriter, r *http.Request, e *entry) {
	body, err := a.block(e)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer body.Close()
	resp, err := http.ReadResponse(bufio.NewReader(body), r)
	if err != nil {
		http.Error(w, a.blockError(e, fmt.Errorf("stored response: %w", err)).Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	for _, k := range []string{"Content-Type", "Date"} {
		if _, ok := resp.Header[k]; !ok {
			h[k] = nil // keep net/http from adding one
		}
	}
	w.WriteHeader(resp.StatusCode)
	if r.Method != http.MethodHead {
		_, _ = io.Copy(w, resp.Body)
	}
}

// find returns the entry for the URL that r asks for, trying the
// alternatives described at ServeHTTP, and the URL it tried first.
func (a *Archive) find(r *http.Request) (*entry, string) {
	scheme, host, uri := "http", r.Host, r.RequestURI
	if r.TLS != nil {
		scheme = "https"
	}
	if r.URL.IsAbs() {
		scheme, host, uri = r.URL.Scheme, r.URL.Host, r.URL.RequestURI()
	} else if uri == "" || uri[0] != '/' {
		uri = r.URL.RequestURI()
	}
	other := "https"
	if scheme == "https" {
		other = "http"
	}
	hosts := []string{host}
	if h := withoutPort(host); h != host {
		hosts = append(hosts, h)
	}
	first := scheme + "://" + host + uri
	for _, h := range hosts {
		for _, s := range []string{scheme, other} {
			if e := a.lookup(s + "://" + h + uri); e != nil {
				return e, first
			}
		}
	}
	return nil, first
}

// withoutPort returns hostport without its port, if it has one.
func withoutPort(hostport string) string {
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 || strings.Contains(hostport[i:], "]") {
		return hostport
	}
	return hostport[:i]
}

// notFoundText is the body of a 404 for url (without the final newline).
func notFoundText(url string) string {
	return fmt.Sprintf("%s: %s", ErrNotFound, url)
}

// track registers a hijacked connection; it returns false after Close.
func (a *Archive) track(c net.Conn) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed.Load() {
		return false
	}
	a.conns[c] = struct{}{}
	a.wg.Add(1)
	return true
}

// untrack unregisters a hijacked connection.
func (a *Archive) untrack(c net.Conn) {
	a.mu.Lock()
	delete(a.conns, c)
	a.mu.Unlock()
	a.wg.Done()
}

// serveConn answers req with e (or a 404 for url if e is nil) on the
// hijacked connection c, then reads and answers the next requests on c for
// as long as the connection can be kept open.
func (a *Archive) serveConn(c net.Conn, rw *bufio.ReadWriter, req *http.Request, e *entry, url string, srv *http.Server, end func(status int)) {
	var idle, writeTimeout time.Duration
	if srv != nil {
		idle, writeTimeout = srv.IdleTimeout, srv.WriteTimeout
		if idle == 0 {
			idle = srv.ReadTimeout
		}
	}
	_ = c.SetDeadline(time.Time{})
	first := req
	forceClose := false
	for {
		keep := req.ProtoAtLeast(1, 1) && !req.Close && !forceClose && !a.closed.Load()
		if writeTimeout > 0 {
			_ = c.SetWriteDeadline(time.Now().Add(writeTimeout))
		}
		var err error
		if e == nil {
			err = writeText(rw.Writer, req, http.StatusNotFound, notFoundText(url), keep)
		} else {
			var ok bool
			ok, err = a.writeStored(rw.Writer, req, e, keep)
			keep = keep && ok
		}
		// The request ends once its response is written out to the buffer,
		// before the last flush, as net/http handlers end before their
		// buffered response is flushed: a client that has the response
		// always finds it in the statistics.
		end(statusOf(e))
		if err == nil {
			err = rw.Flush()
		}
		if err != nil {
			_ = c.Close()
			return
		}
		if !keep {
			lingerClose(c)
			return
		}

		// The next request.
		if idle > 0 {
			_ = c.SetReadDeadline(time.Now().Add(idle))
		}
		req, err = http.ReadRequest(rw.Reader)
		if err != nil {
			var ne net.Error
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !(errors.As(err, &ne) && ne.Timeout()) {
				_ = writeText(rw.Writer, nil, http.StatusBadRequest, "replay: bad request", false)
				_ = rw.Flush()
			}
			lingerClose(c)
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		req.RemoteAddr, req.TLS = first.RemoteAddr, first.TLS
		forceClose = !drainBody(rw.Writer, req)
		if a.closed.Load() {
			_ = c.Close()
			return
		}
		end = a.observed(req)
		e, url = a.find(req)
	}
}

// drainBody reads and discards the body of req, first sending
// "100 Continue" if the client waits for it. It reports whether the whole
// body was read, so that the connection can be reused.
func drainBody(w *bufio.Writer, req *http.Request) bool {
	defer req.Body.Close()
	if req.ContentLength == 0 {
		return true
	}
	if req.Header.Get("Expect") == "100-continue" {
		if _, err := w.WriteString("HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return false
		}
		if err := w.Flush(); err != nil {
			return false
		}
	}
	n, err := io.Copy(io.Discard, io.LimitReader(req.Body, maxDrain+1))
	return err == nil && n <= maxDrain
}

// writeText writes a complete text/plain response with the given status and
// body (plus a newline, as http.Error), for req (nil: not a HEAD request).
func writeText(w *bufio.Writer, req *http.Request, code int, text string, keep bool) error {
	body := text + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\n", code, http.StatusText(code))
	fmt.Fprintf(w, "Content-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n")
	fmt.Fprintf(w, "Date: %s\r\nContent-Length: %d\r\n", time.Now().UTC().Format(http.TimeFormat), len(body))
	if !keep {
		fmt.Fprintf(w, "Connection: close\r\n")
	}
	_, err := w.WriteString("\r\n")
	if req == nil || req.Method != http.MethodHead {
		_, err = w.WriteString(body)
	}
	return err
}

// writeStored writes the stored response of e verbatim to w, the header
// section only if req is a HEAD request. It reports whether the response
// leaves the connection usable for another request. An error means the
// response could not be written completely and the connection must be
// dropped. A block that cannot be read at all becomes a 500 response.
func (a *Archive) writeStored(w *bufio.Writer, req *http.Request, e *entry, keep bool) (bool, error) {
	body, err := a.block(e)
	if err != nil {
		return keep, writeText(w, req, http.StatusInternalServerError, err.Error(), keep)
	}
	defer body.Close()
	src := &errReader{r: body}
	br := bufio.NewReader(src)
	head, complete := readHead(br)
	if src.err != nil {
		return keep, writeText(w, req, http.StatusInternalServerError, a.blockError(e, src.err).Error(), keep)
	}

	// Decide from the stored header how a client will find the end of the
	// response. The connection stays open only if that end is where the
	// stored bytes end.
	resp, perr := http.ReadResponse(bufio.NewReader(bytes.NewReader(head)), req)
	delimited := complete && perr == nil && !resp.Close && resp.StatusCode >= 200
	bodyLen := e.length - int64(len(head))

	if _, err := w.Write(head); err != nil {
		return false, err
	}
	if req.Method == http.MethodHead {
		return delimited, nil
	}
	if delimited && len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked" {
		ok, err := copyChunked(w, br)
		if err == nil {
			err = src.err
		}
		return ok, err
	}
	switch {
	case !delimited:
	case resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified:
		delimited = bodyLen == 0
	default:
		delimited = resp.ContentLength >= 0 && resp.ContentLength == bodyLen
	}
	if _, err := io.Copy(w, br); err != nil {
		return false, err
	}
	return delimited, src.err
}

// readHead reads the header section of an HTTP message: lines up to and
// including the first empty one. complete is false if there is no empty
// line (within maxHead bytes); head then holds what was read.
func readHead(br *bufio.Reader) (head []byte, complete bool) {
	for len(head) < maxHead {
		line, err := br.ReadSlice('\n')
		head = append(head, line...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return head, false
		}
		if len(line) <= 2 && len(bytes.TrimRight(line, "\r\n")) == 0 {
			return head, true
		}
	}
	return head, false
}

// copyChunked copies the rest of br, a chunked body, to w and reports whether
// it is exactly one well-formed chunked body: chunks, last chunk, trailer
// section and nothing after it.
func copyChunked(w *bufio.Writer, br *bufio.Reader) (bool, error) {
	ew := &errWriter{w: w}
	cbr := bufio.NewReader(io.TeeReader(br, ew))
	_, err := io.Copy(io.Discard, httputil.NewChunkedReader(cbr))
	ok := err == nil && skipTrailer(cbr) == nil
	if n, err := io.Copy(io.Discard, cbr); err != nil || n > 0 {
		ok = false
	}
	if ew.err != nil {
		return false, ew.err
	}
	return ok, nil
}

// skipTrailer reads a trailer section, up to and including its empty line.
func skipTrailer(br *bufio.Reader) error {
	for range 1000 {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return nil
		}
	}
	return errors.New("trailer too long")
}

// errReader records the first error other than io.EOF of r.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// errWriter records the first error of w.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

// lingerClose closes c gracefully: it shuts down the writing side, reads
// and discards what the client still sends for up to lingerTime, then closes.
func lingerClose(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			_ = c.SetReadDeadline(time.Now().Add(lingerTime))
			_, _ = io.CopyN(io.Discard, c, maxDrain)
		}
	}
	_ = c.Close()
}
