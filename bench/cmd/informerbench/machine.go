package main

import (
	"bufio"
	"os"
	"runtime"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// machine describes where the numbers come from.
type machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryGiB int    `json:"memoryGiB"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
	Server    string `json:"server"`
}

func describeMachine(cs kubernetes.Interface) machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	m.CPU = procField("/proc/cpuinfo", "model name")
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		var n int
		for _, c := range strings.TrimSuffix(kb, " kB") {
			if c >= '0' && c <= '9' {
				n = n*10 + int(c-'0')
			}
		}
		m.MemoryGiB = (n + 1<<19) >> 20
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if v, err := cs.Discovery().ServerVersion(); err == nil {
		m.Server = "kube-apiserver " + v.GitVersion
	}
	return m
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
