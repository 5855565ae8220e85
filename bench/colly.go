package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"
)

// CollyOptions configure the bare colly crawler that `bench peers` runs on
// the same web as Meridian: asynchronous, robots.txt obeyed, no per-host
// limit or delay, nothing stored.
type CollyOptions struct {
	Seeds    []string
	DNS      string        // websim's DNS server (host:port)
	Workers  int           // requests in parallel over all hosts
	Max      int64         // stop visiting new URLs after this many page responses
	Duration time.Duration // and after this long
}

// CollyResult is what the colly crawler did.
type CollyResult struct {
	Pages       int64   `json:"pages"`         // page responses (any status)
	OK          int64   `json:"ok"`            // of which 2xx
	Failed      int64   `json:"failed"`        // requests without a response
	Links       int64   `json:"links"`         // links extracted
	WindowS     float64 `json:"window_s"`      // first request to the last response
	PagesPerSec float64 `json:"pages_per_s"`   // Pages / WindowS
	Cut         bool    `json:"cut,omitempty"` // stopped by Max or Duration, not by running out of URLs
}

// CrawlColly crawls from o.Seeds with colly as a crawler would be written
// with it in a few lines: every <a href> visited (colly's own visited
// set), robots.txt obeyed, o.Workers requests at once. Names resolve
// through websim's DNS server.
func CrawlColly(ctx context.Context, o CollyOptions) (CollyResult, error) {
	var res CollyResult
	if o.Workers <= 0 || len(o.Seeds) == 0 || o.DNS == "" {
		return res, fmt.Errorf("bench: colly: %d workers, %d seeds, DNS %q", o.Workers, len(o.Seeds), o.DNS)
	}
	ctx, cancel := context.WithTimeout(ctx, max(o.Duration, time.Second))
	defer cancel()
	dialer := &net.Dialer{Timeout: 10 * time.Second, Resolver: &net.Resolver{PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, o.DNS)
		}}}
	c := colly.NewCollector(colly.Async(true), colly.UserAgent("bench-colly/1.0"))
	c.Context = ctx
	c.IgnoreRobotsTxt = false // colly ignores robots.txt unless told
	c.WithTransport(&http.Transport{DialContext: dialer.DialContext, MaxIdleConns: 4 * o.Workers, MaxIdleConnsPerHost: 2,
		IdleConnTimeout: 30 * time.Second, ResponseHeaderTimeout: 10 * time.Second})
	c.SetRequestTimeout(15 * time.Second)
	if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: o.Workers}); err != nil {
		return res, fmt.Errorf("bench: colly: %w", err)
	}
	var pages, ok, failed, links atomic.Int64
	var first, last atomic.Int64
	stop := func() bool { return ctx.Err() != nil || (o.Max > 0 && pages.Load() >= o.Max) }
	c.OnRequest(func(r *colly.Request) {
		if stop() {
			r.Abort()
			return
		}
		first.CompareAndSwap(0, time.Now().UnixNano())
	})
	c.OnResponse(func(r *colly.Response) {
		pages.Add(1)
		if r.StatusCode >= 200 && r.StatusCode < 300 {
			ok.Add(1)
		}
		last.Store(time.Now().UnixNano())
	})
	c.OnError(func(r *colly.Response, err error) {
		if r != nil && r.StatusCode > 0 {
			pages.Add(1)
			last.Store(time.Now().UnixNano())
		} else {
			failed.Add(1)
		}
	})
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		links.Add(1)
		if !stop() {
			e.Request.Visit(e.Attr("href"))
		}
	})
	for _, s := range o.Seeds {
		c.Visit(s)
	}
	c.Wait()
	res = CollyResult{Pages: pages.Load(), OK: ok.Load(), Failed: failed.Load(), Links: links.Load(), Cut: stop()}
	if f, l := first.Load(), last.Load(); f > 0 && l > f {
		res.WindowS = time.Duration(l - f).Seconds()
		res.PagesPerSec = float64(res.Pages) / res.WindowS
	}
	return res, nil
}
