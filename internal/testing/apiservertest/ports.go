package apiservertest

import "net"

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment
// ago. All listeners stay open until every port is picked, so the ports are
// distinct; another process may still grab one before the child binds it.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
