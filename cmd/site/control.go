package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/meridian-crawler/meridian/rounds/control"
	"github.com/meridian-crawler/meridian/site"
	"github.com/spf13/cobra"
)

// nodeFlags are the flags every control command has: which node to ask.
type nodeFlags struct{ data, addr string }

func (f *nodeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.data, "data", site.DefaultConfig().Data, "a node's data directory (its API address and certificate are found there)")
	cmd.Flags().StringVar(&f.addr, "addr", "", "a node's API address (--api), for a node without --certs (default: from DATA/site.json)")
}

func (f *nodeFlags) dial() (*site.NodeAPI, error) { return site.DialNode(f.data, f.addr) }

// controlCmds are the operator's commands on a running site.
func controlCmds(stdin io.Reader, stdout io.Writer) []*cobra.Command {
	return []*cobra.Command{injectCmd(stdin, stdout), pauseCmd(stdout, true), pauseCmd(stdout, false), hostCmd(stdout), limitsCmd(stdout)}
}

func injectCmd(stdin io.Reader, stdout io.Writer) *cobra.Command {
	var nf nodeFlags
	cmd := &cobra.Command{
		Use:   "inject FILE|-",
		Short: "Add seeds to a running crawl (one URL a line, as --seeds; - reads stdin); bad lines are reported",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("inject: %w", err)
				}
				defer f.Close()
				in = f
			}
			n, err := nf.dial()
			if err != nil {
				return err
			}
			reply, err := n.Inject(cmd.Context(), in)
			if err != nil {
				return err
			}
			for _, b := range reply.Bad {
				fmt.Fprintf(stdout, "%s:%d: %.200q: %s\n", args[0], b.Line, b.Text, b.Err)
			}
			fmt.Fprintf(stdout, "injected: %d new, %d known, %d sent to their owner, %d bad lines\n", reply.Added, reply.Known, reply.Sent, len(reply.Bad))
			return nil
		},
	}
	nf.add(cmd)
	return cmd
}

func pauseCmd(stdout io.Writer, pause bool) *cobra.Command {
	var nf nodeFlags
	use, short := "pause", "Pause a running crawl: no new round starts, rounds in flight finish; kept across restarts"
	if !pause {
		use, short = "resume", "Resume a paused crawl"
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return change(cmd.Context(), nf, stdout, control.Op{Pause: &pause})
		},
	}
	nf.add(cmd)
	return cmd
}

func hostCmd(stdout io.Writer) *cobra.Command {
	var nf nodeFlags
	var delay time.Duration
	var block string
	var unblock bool
	cmd := &cobra.Command{
		Use:   "host HOST (--delay D | --block [UNTIL] | --unblock)",
		Short: "Override one host's politeness in a running crawl: its delay, or a block (until an RFC 3339 time or a duration from now, or until --unblock)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := control.Op{Host: strings.ToLower(args[0])}
			if len(args) == 2 {
				// "--block UNTIL": the flag's value is optional, so
				// pflag leaves UNTIL as an argument.
				if !cmd.Flags().Changed("block") || block != "forever" {
					return fmt.Errorf("host: one host at a time (got %q and %q)", args[0], args[1])
				}
				block = args[1]
			}
			if cmd.Flags().Changed("delay") {
				d := control.Duration(delay)
				op.Delay = &d
			}
			if cmd.Flags().Changed("block") {
				until, err := parseUntil(block, time.Now())
				if err != nil {
					return err
				}
				op.Block = &until
			}
			op.Unblock = unblock
			if op.Delay == nil && op.Block == nil && !op.Unblock {
				return errors.New("host: give --delay, --block or --unblock")
			}
			return change(cmd.Context(), nf, stdout, op)
		},
	}
	nf.add(cmd)
	cmd.Flags().DurationVar(&delay, "delay", 0, "the host's delay between requests (0: back to the site's --host-delay); a longer robots.txt Crawl-delay still applies")
	cmd.Flags().StringVar(&block, "block", "", "block the host: until UNTIL (RFC 3339, or a duration from now such as 2h); alone, until --unblock")
	cmd.Flags().Lookup("block").NoOptDefVal = "forever"
	cmd.Flags().BoolVar(&unblock, "unblock", false, "lift the host's block")
	return cmd
}

// parseUntil reads a block's end: "forever" (zero time), an RFC 3339
// time, or a duration from now.
func parseUntil(s string, now time.Time) (time.Time, error) {
	if s == "" || s == "forever" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("host: --block %q: want an RFC 3339 time (2026-12-01T08:00:00Z) or a positive duration (2h)", s)
	}
	return now.Add(d), nil
}

func limitsCmd(stdout io.Writer) *cobra.Command {
	var nf nodeFlags
	var width, perHost, budget, pldBudget int
	cmd := &cobra.Command{
		Use:   "limits [--width N] [--per-host K] [--host-budget N] [--pld-budget N]",
		Short: "Change a running crawl's round limits (0: back to the site's flag); with no flag, print the controls",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var op control.Op
			for name, v := range map[string]*int{"width": &width, "per-host": &perHost, "host-budget": &budget, "pld-budget": &pldBudget} {
				if cmd.Flags().Changed(name) {
					switch name {
					case "width":
						op.Width = v
					case "per-host":
						op.PerHost = v
					case "host-budget":
						op.HostBudget = v
					case "pld-budget":
						op.PLDBudget = v
					}
				}
			}
			if op.Empty() {
				n, err := nf.dial()
				if err != nil {
					return err
				}
				ctl, err := n.Controls(cmd.Context())
				if err != nil {
					return err
				}
				return printControls(stdout, ctl)
			}
			return change(cmd.Context(), nf, stdout, op)
		},
	}
	nf.add(cmd)
	cmd.Flags().IntVar(&width, "width", 0, "URLs per round, site-wide")
	cmd.Flags().IntVar(&perHost, "per-host", 0, "URLs per host per round (k)")
	cmd.Flags().IntVar(&budget, "host-budget", 0, "pages per host")
	cmd.Flags().IntVar(&pldBudget, "pld-budget", 0, "pages per registrable domain, its hosts together (0: back to the site's --pld-budget)")
	return cmd
}

// change applies op and prints the controls it made.
func change(ctx context.Context, nf nodeFlags, stdout io.Writer, op control.Op) error {
	if err := op.Check(); err != nil {
		return err
	}
	n, err := nf.dial()
	if err != nil {
		return err
	}
	ctl, err := n.Control(ctx, op)
	if err != nil {
		return err
	}
	return printControls(stdout, ctl)
}

func printControls(w io.Writer, ctl control.Controls) error {
	ctl.Changes = nil
	if k := len(ctl.Hosts); k > 20 {
		fmt.Fprintf(w, "(%d hosts with an override; the first 20 by name follow)\n", k)
		keep := map[string]control.Host{}
		for _, h := range slices.Sorted(maps.Keys(ctl.Hosts))[:20] {
			keep[h] = ctl.Hosts[h]
		}
		ctl.Hosts = keep
	}
	b, err := json.MarshalIndent(ctl, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}
