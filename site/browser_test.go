package site_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/meridian-crawler/meridian/bench"
)

// browser is a headless Debian chromium driven over the DevTools
// protocol, with the errors and warnings its page wrote to the console.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

// startBrowser starts headless chromium for the test. It fails (it does
// not skip) when chromium is missing: the README's test command,
// scripts/test, installs it.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	opts, err := bench.ChromiumOptions()
	if err != nil {
		t.Fatal(err)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{ctx: ctx}
	msgs := chromedp.Console(ctx) // starts the browser
	var wg sync.WaitGroup
	wg.Go(func() { // owner: the test; ends when ctx is cancelled
		for m, err := range msgs {
			if err != nil {
				b.note("console: " + err.Error())
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleWarning, chromedp.ConsoleException:
				b.note(m.String())
			}
		}
	})
	t.Cleanup(func() { cancel(); cancelAlloc(); wg.Wait() })
	return b
}

func (b *browser) note(msg string) {
	if b.ctx.Err() != nil {
		return // the test is over: the browser is going away
	}
	b.mu.Lock()
	b.errors = append(b.errors, msg)
	b.mu.Unlock()
}

// consoleErrors returns what the page wrote as errors or warnings so far.
func (b *browser) consoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// do runs actions with a time limit.
func (b *browser) do(d time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// polls is how many dashboard updates the page has rendered.
func (b *browser) polls() int {
	n, _ := eval[int](b, `Number(document.getElementById('updated')?.dataset.polls || 0)`)
	return n
}

// screenshot saves the page as NAME.png among the test's artifacts (go
// test -artifacts -outputdir DIR keeps them).
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Error(err)
		return
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}
