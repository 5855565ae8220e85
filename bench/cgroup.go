package bench

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The CPU quota of bench cluster's nodes (--node-cpus): each node process
// in a cgroup of its own whose CPU bandwidth is capped, so that one box
// holds several "machines" of a fixed size. websim and the benchmark
// itself stay outside the quotas.
//
// Where: cgroup v1's cpu controller (cpu.cfs_period_us, cpu.cfs_quota_us)
// when it is mounted and writable, else cgroup v2's cpu.max when the cpu
// controller is available in the unified hierarchy, else none (the nodes
// run uncapped, and ClusterQuota says so). The groups are
// PARENT/meridian-bench/PID-RUN-NODE (PID: the benchmark's process), one
// per node and run, removed at the end of each run; groups left by a
// benchmark that died (its PID gone) are removed when the next one starts.
//
// How a node enters its group: it is started through /bin/sh, which
// writes its own PID to the group's cgroup.procs and then execs `site`:
// the node's process (the same PID) is in the group before its first
// instruction, so none of its threads or children runs outside the quota.

// Modes of ClusterQuota.
const (
	QuotaOff  = "off"               // no quota asked for (--node-cpus not given)
	QuotaV1   = "cgroup v1 cpu"     // cpu.cfs_quota_us under the v1 cpu hierarchy
	QuotaV2   = "cgroup v2 cpu.max" // cpu.max under the unified hierarchy
	QuotaNone = "none"              // asked for, but no usable cgroup: the nodes ran uncapped
)

// cgroupMounts are where the cgroup hierarchies may be mounted, in the
// order they are tried.
type cgroupMounts struct {
	v1CPU  []string // the v1 cpu hierarchy (alone or with cpuacct)
	v1Acct string   // the v1 cpuacct hierarchy when mounted apart
	v2     []string // the unified hierarchy (hybrid, then pure v2)
}

// systemCgroups are the usual mount points.
var systemCgroups = cgroupMounts{
	v1CPU:  []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"},
	v1Acct: "/sys/fs/cgroup/cpuacct",
	v2:     []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"},
}

// The names bench uses.
const (
	cgroupParent    = "meridian-bench"
	cgroupJoinShell = "/bin/sh"
	cfsPeriodUS     = 100_000 // the quota's period: the kernel's default
	// MinNodeCPUs is the smallest --node-cpus: the kernel's smallest CFS
	// quota is 1 ms per period, 0.01 of the 100 ms period used.
	MinNodeCPUs   = 0.01
	cgroupRmBound = 3 * time.Second // removing one group whose processes just exited
)

// joinScript joins the cgroup.procs files given as $1 and $2 ("-": none)
// and execs the rest of its arguments.
const joinScript = `echo $$ > "$1" && { [ "$2" = - ] || echo $$ > "$2"; } && shift 2 && exec "$@"`

// ClusterQuota is how bench cluster capped its nodes' CPU (in the JSON).
type ClusterQuota struct {
	// NodeCPUs is the quota asked for, in cores per node (0: none).
	NodeCPUs float64 `json:"node_cpus"`
	// Mode: QuotaOff, QuotaV1, QuotaV2 or QuotaNone (uncapped, see Note).
	Mode string `json:"mode"`
	// Note: why no quota could be applied, leftovers of earlier runs
	// removed or not, groups not removed at the end.
	Note string `json:"note,omitempty"`
	// PeriodUS and QuotaUS: the CFS bandwidth written to each node's group.
	PeriodUS int64 `json:"period_us,omitempty"`
	QuotaUS  int64 `json:"quota_us,omitempty"`
	// Parent is the groups' parent directory (in the cpu hierarchy).
	Parent string `json:"parent,omitempty"`
	// Accounting is where a node's CPU time is read from ("" with no
	// quota: /proc only).
	Accounting string `json:"accounting,omitempty"`
	// Join says how a node enters its group.
	Join string `json:"join,omitempty"`
}

// Capped reports whether the nodes ran in CPU quotas.
func (q ClusterQuota) Capped() bool { return q.Mode == QuotaV1 || q.Mode == QuotaV2 }

// ParseNodeCPUs parses --node-cpus: cores per node, more than 0 (leave the
// flag out for no quota), at least MinNodeCPUs and at most numCPU (this
// machine's cores).
func ParseNodeCPUs(s string, numCPU int) (float64, error) {
	c, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(c) || math.IsInf(c, 0) {
		return 0, fmt.Errorf("bench: --node-cpus %q: not a number of cores (e.g. 0.25)", s)
	}
	if err := checkNodeCPUs(c, numCPU); err != nil {
		return 0, err
	}
	if c == 0 {
		return 0, fmt.Errorf("bench: --node-cpus 0: a quota must be more than 0 cores (leave the flag out to run the nodes uncapped)")
	}
	return c, nil
}

// checkNodeCPUs checks ClusterConfig.NodeCPUs (0: no quota).
func checkNodeCPUs(c float64, numCPU int) error {
	switch {
	case math.IsNaN(c) || math.IsInf(c, 0):
		return fmt.Errorf("bench: --node-cpus %v: not a number of cores", c)
	case c < 0:
		return fmt.Errorf("bench: --node-cpus %v: must not be negative", c)
	case c > 0 && c < MinNodeCPUs:
		return fmt.Errorf("bench: --node-cpus %v: below the smallest quota, %v core (1 ms per 100 ms period)", c, MinNodeCPUs)
	case c > float64(numCPU):
		return fmt.Errorf("bench: --node-cpus %v: more than this machine's %d cores", c, numCPU)
	}
	return nil
}

// ParseClusterNodes parses --nodes: comma-separated numbers of nodes, one
// run each, in order, each in [1, maxClusterNodes].
func ParseClusterNodes(s string) ([]int, error) {
	var out []int
	for i, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("bench: --nodes %q: item %d (%q) is not a number of nodes", s, i+1, f)
		}
		if n < 1 || n > maxClusterNodes {
			return nil, fmt.Errorf("bench: --nodes %q: item %d is %d, want 1 to %d nodes", s, i+1, n, maxClusterNodes)
		}
		out = append(out, n)
	}
	return out, nil
}

// cpuQuota is a usable cgroup setup for the nodes' quotas.
type cpuQuota struct {
	mode   string
	parent string // PARENT/meridian-bench in the cpu (v1) or unified (v2) hierarchy
	// acct is the parent in the v1 cpuacct hierarchy when it is mounted
	// apart from cpu ("" otherwise: the cpu group itself accounts).
	acct   string
	period int64
	quota  int64
	owner  int // this process's PID: the prefix of its groups' names
}

// setupCPUQuota finds a usable cgroup for quotas of cpus cores each and
// removes the groups left by benchmarks that died. It returns nil and a
// ClusterQuota saying why when there is none (the nodes then run
// uncapped); cpus 0 asks for none.
func setupCPUQuota(cpus float64) (*cpuQuota, ClusterQuota) {
	return setupCPUQuotaAt(systemCgroups, cpus)
}

// setupCPUQuotaAt is setupCPUQuota with the hierarchies at m.
func setupCPUQuotaAt(m cgroupMounts, cpus float64) (*cpuQuota, ClusterQuota) {
	info := ClusterQuota{NodeCPUs: cpus, Mode: QuotaOff}
	if cpus <= 0 {
		return nil, info
	}
	period := int64(cfsPeriodUS)
	q := &cpuQuota{period: period, quota: max(1000, int64(math.Round(cpus*float64(period)))), owner: os.Getpid()}
	ok1, why1 := q.setupV1(m)
	switch {
	case ok1:
		info.Mode, info.Accounting = QuotaV1, "cpuacct.usage"
		if q.acct == "" && !exists(filepath.Join(filepath.Dir(q.parent), "cpuacct.usage")) {
			info.Accounting = ""
		}
	default:
		if ok2, why2 := q.setupV2(m); ok2 {
			info.Mode, info.Accounting = QuotaV2, "cpu.stat usage_usec"
		} else {
			info.Mode, info.Note = QuotaNone, "no CPU quota: the nodes ran uncapped ("+why1+"; "+why2+")"
			return nil, info
		}
	}
	info.PeriodUS, info.QuotaUS, info.Parent = q.period, q.quota, q.parent
	info.Join = "started as `" + cgroupJoinShell + " -c 'echo $$ > GROUP/cgroup.procs && exec site up ...'`: the node's PID joins its group before site runs, so no thread escapes"
	if info.Accounting == "" {
		info.Accounting = "none (no cpuacct): /proc only"
	}
	info.Note = q.sweep()
	return q, info
}

// setupV1 uses the v1 cpu hierarchy if it is mounted and writable.
func (q *cpuQuota) setupV1(m cgroupMounts) (bool, string) {
	root := ""
	for _, r := range m.v1CPU {
		if exists(filepath.Join(r, "cpu.cfs_quota_us")) {
			root = r
			break
		}
	}
	if root == "" {
		return false, "cgroup v1: no cpu controller mounted at " + strings.Join(m.v1CPU, " or ")
	}
	parent := filepath.Join(root, cgroupParent)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return false, fmt.Sprintf("cgroup v1 cpu at %s not writable: %v", root, err)
	}
	if !exists(filepath.Join(root, "cpuacct.usage")) && m.v1Acct != "" && exists(filepath.Join(m.v1Acct, "cpuacct.usage")) {
		acct := filepath.Join(m.v1Acct, cgroupParent)
		if err := os.MkdirAll(acct, 0o755); err == nil {
			q.acct = acct
		}
	}
	q.mode, q.parent = QuotaV1, parent
	return true, ""
}

// setupV2 uses the unified hierarchy if its cpu controller is available
// (and can be enabled for the groups below it).
func (q *cpuQuota) setupV2(m cgroupMounts) (bool, string) {
	for _, root := range m.v2 {
		b, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
		if err != nil {
			continue
		}
		if !slices.Contains(strings.Fields(string(b)), "cpu") {
			return false, fmt.Sprintf("cgroup v2 at %s: the cpu controller is not available there (cgroup.controllers %q)", root, strings.TrimSpace(string(b)))
		}
		parent := filepath.Join(root, cgroupParent)
		err = writeFile(filepath.Join(root, "cgroup.subtree_control"), "+cpu")
		if err == nil {
			err = os.MkdirAll(parent, 0o755)
		}
		if err == nil {
			err = writeFile(filepath.Join(parent, "cgroup.subtree_control"), "+cpu")
		}
		if err != nil {
			return false, fmt.Sprintf("cgroup v2 at %s: cannot enable the cpu controller for %s: %v", root, parent, err)
		}
		q.mode, q.parent = QuotaV2, parent
		return true, ""
	}
	return false, "cgroup v2: no unified hierarchy at " + strings.Join(m.v2, " or ")
}

// sweep removes the groups of benchmarks that are no longer running (their
// names start with their PID), and says what it did or could not do.
func (q *cpuQuota) sweep() string {
	var removed, kept []string
	for _, parent := range []string{q.parent, q.acct} {
		if parent == "" {
			continue
		}
		ents, err := os.ReadDir(parent)
		if err != nil {
			kept = append(kept, fmt.Sprintf("cannot list %s: %v", parent, err))
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			pid, err := strconv.Atoi(strings.SplitN(e.Name(), "-", 2)[0])
			if err != nil || pid == q.owner || pidAlive(pid) {
				continue // not bench's, or a running benchmark's
			}
			dir := filepath.Join(parent, e.Name())
			if err := rmdirBounded(dir, 0); err != nil {
				kept = append(kept, fmt.Sprintf("%s (%v)", dir, err))
				continue
			}
			removed = append(removed, dir)
		}
	}
	var note []string
	if len(removed) > 0 {
		note = append(note, fmt.Sprintf("removed %d group(s) left by an earlier run: %s", len(removed), strings.Join(removed, ", ")))
	}
	if len(kept) > 0 {
		note = append(note, "could not remove leftovers of an earlier run: "+strings.Join(kept, "; "))
	}
	return strings.Join(note, "; ")
}

// nodeCgroup is one node's group.
type nodeCgroup struct {
	q    *cpuQuota
	name string // PID-RUN-NODE
	cpu  string // its directory in the cpu (v1) or unified (v2) hierarchy
	acct string // its directory in the v1 cpuacct hierarchy ("": cpu's)
}

// create makes the group of one node (run names the run) with the quota.
func (q *cpuQuota) create(run, node string) (*nodeCgroup, error) {
	g := &nodeCgroup{q: q, name: fmt.Sprintf("%d-%s-%s", q.owner, run, node)}
	g.cpu = filepath.Join(q.parent, g.name)
	if err := os.Mkdir(g.cpu, 0o755); err != nil {
		return nil, fmt.Errorf("bench: cgroup of node %s: %w", node, err)
	}
	var err error
	switch q.mode {
	case QuotaV1:
		err = writeFile(filepath.Join(g.cpu, "cpu.cfs_period_us"), strconv.FormatInt(q.period, 10))
		if err == nil {
			err = writeFile(filepath.Join(g.cpu, "cpu.cfs_quota_us"), strconv.FormatInt(q.quota, 10))
		}
	case QuotaV2:
		err = writeFile(filepath.Join(g.cpu, "cpu.max"), fmt.Sprintf("%d %d", q.quota, q.period))
	}
	if err == nil && q.acct != "" {
		g.acct = filepath.Join(q.acct, g.name)
		if err = os.Mkdir(g.acct, 0o755); err != nil {
			g.acct = ""
		}
	}
	if err != nil {
		g.remove()
		return nil, fmt.Errorf("bench: cgroup of node %s: set the quota: %w", node, err)
	}
	return g, nil
}

// command is bin and args started through the join wrapper.
func (g *nodeCgroup) command(bin string, args []string) (string, []string) {
	acct := "-"
	if g.acct != "" {
		acct = filepath.Join(g.acct, "cgroup.procs")
	}
	return cgroupJoinShell, append([]string{"-c", joinScript, "meridian-cgroup-join",
		filepath.Join(g.cpu, "cgroup.procs"), acct, bin}, args...)
}

// holds reports whether process pid is in the group (its cpu one), from
// /proc/PID/cgroup.
func (g *nodeCgroup) holds(pid int) (bool, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	want := "/" + cgroupParent + "/" + g.name
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controllers:path; v2's line is 0::path.
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || !strings.HasSuffix(parts[2], want) {
			continue
		}
		if g.q.mode == QuotaV2 && parts[0] == "0" || g.q.mode == QuotaV1 && slices.Contains(strings.Split(parts[1], ","), "cpu") {
			return true, nil
		}
	}
	return false, sc.Err()
}

// usage is the group's CPU time so far (ok false: not accounted).
func (g *nodeCgroup) usage() (time.Duration, bool) {
	switch {
	case g.q.mode == QuotaV2:
		v, ok := statField(filepath.Join(g.cpu, "cpu.stat"), "usage_usec")
		return time.Duration(v) * time.Microsecond, ok
	case g.acct != "":
		return readNS(filepath.Join(g.acct, "cpuacct.usage"))
	default:
		return readNS(filepath.Join(g.cpu, "cpuacct.usage"))
	}
}

// throttling is how often the quota stopped the group: periods with
// runnable tasks, periods throttled, and the time throttled.
func (g *nodeCgroup) throttling() (periods, throttled int64, for_ time.Duration) {
	stat := filepath.Join(g.cpu, "cpu.stat")
	periods, _ = statField(stat, "nr_periods")
	throttled, _ = statField(stat, "nr_throttled")
	if g.q.mode == QuotaV2 {
		us, _ := statField(stat, "throttled_usec")
		return periods, throttled, time.Duration(us) * time.Microsecond
	}
	ns, _ := statField(stat, "throttled_time")
	return periods, throttled, time.Duration(ns)
}

// remove removes the group (both hierarchies), waiting a bounded time
// for the processes that just left it.
func (g *nodeCgroup) remove() error {
	var errs []error
	for _, d := range []string{g.acct, g.cpu} {
		if d != "" {
			if err := rmdirBounded(d, cgroupRmBound); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// rmdirBounded removes a cgroup directory, trying again while it is busy
// (its processes exiting) for up to bound.
func rmdirBounded(dir string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// statField reads one "key value" line of a cgroup stat file.
func statField(path, key string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			v, err := strconv.ParseInt(f[1], 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// readNS reads a file holding one count of nanoseconds.
func readNS(path string) (time.Duration, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(v), err == nil
}

// writeFile writes s to a cgroup control file (no create, no truncate
// needed: the kernel takes one write).
func writeFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		f.Close()
		return fmt.Errorf("write %q to %s: %w", s, path, err)
	}
	return f.Close()
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
