"""Which network interface gloo's groups use (the learner workers' group, the weight broadcast's). Gloo binds to the
address this machine's host name resolves to, which on many machines is 127.0.0.1 (Debian's /etc/hosts): a group
whose members are on one node works, and members on other nodes are refused ("connectFullMesh failed ...
remote=[127.0.0.1]"). Each member therefore names the interface that holds its Ray node's address."""

from __future__ import annotations

import fcntl
import os
import socket
import struct

GLOO_INTERFACE_ENV = "GLOO_SOCKET_IFNAME"
_SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address


def interface_holding(address: str) -> str | None:
    """The name of the interface whose IPv4 address is `address`, None when none is (or not on Linux)."""
    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                answer = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:  # no IPv4 address
                continue
        if socket.inet_ntoa(answer[20:24]) == address:
            return name
    return None


def use_node_interface(node_address: str) -> None:
    """Points gloo at the interface holding `node_address` (this worker's Ray node address), unless the user set
    GLOO_SOCKET_IFNAME: it is read when a group is made."""
    if GLOO_INTERFACE_ENV in os.environ:
        return
    name = interface_holding(node_address)
    if name is not None:
        os.environ[GLOO_INTERFACE_ENV] = name
