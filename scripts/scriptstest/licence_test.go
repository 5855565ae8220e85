package scriptstest_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLicencesListed: every module go.mod requires is in the README's
// licence list, with the licence read from its files, and the repository
// has its own licence (LICENSE, Apache-2.0, and NOTICE).
func TestLicencesListed(t *testing.T) {
	root := repoRoot(t)
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(readme), "\n## Licence\n")
	if start < 0 {
		t.Fatal("README.md has no \"## Licence\" section")
	}
	section := string(readme[start+1:])
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var mods []string
	for _, block := range regexp.MustCompile(`(?s)require \((.*?)\)`).FindAllStringSubmatch(string(gomod), -1) {
		for _, m := range regexp.MustCompile(`(?m)^\t(\S+) v\S+`).FindAllStringSubmatch(block[1], -1) {
			mods = append(mods, m[1])
		}
	}
	if len(mods) < 20 {
		t.Fatalf("read %d modules from go.mod: the pattern is wrong", len(mods))
	}
	for _, m := range mods {
		if !strings.Contains(section, "`"+m+"`") {
			t.Errorf("go.mod requires %s, which the README's licence list lacks: add it with the licence its files give", m)
		}
	}
	lic, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil || !strings.Contains(string(lic), "Apache License") || !strings.Contains(string(lic), "Version 2.0, January 2004") {
		t.Errorf("LICENSE is not the Apache License 2.0 (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(root, "NOTICE")); err != nil {
		t.Error(err)
	}
}
