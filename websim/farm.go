package websim

import (
	"net/http"
	"net/netip"
	"strconv"
)

// resolve maps a lower-case host name of a synthetic web to its
// address: one of its hosts, or a host of the hostile profile's subdomain
// farm (synth.FarmDomain: a wildcard, every s<N> under it answers).
func (sw *synthWeb) resolve(name string) (netip.Addr, bool) {
	if ip, ok := sw.web.ResolveIP(name); ok {
		return ip, true
	}
	return sw.web.FarmIP(name)
}

// serveFarm answers a request to farm host n (synth.Web.RespondFarm).
func (sw *synthWeb) serveFarm(w http.ResponseWriter, r *http.Request, n uint64) {
	hdr := w.Header()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr["Allow"] = []string{"GET, HEAD"}
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	rb := bufPool.Get().(*respBuf)
	defer func() {
		if cap(rb.b) <= 1<<20 {
			bufPool.Put(rb)
		}
	}()
	resp := sw.web.RespondFarm(rb.b[:0], n, r.URL.Path)
	rb.b = resp.Body[:0]
	hdr["Content-Type"] = []string{resp.ContentType}
	hdr["Content-Length"] = []string{strconv.Itoa(len(resp.Body))}
	w.WriteHeader(resp.Status)
	if r.Method != http.MethodHead {
		w.Write(resp.Body)
	}
}
