"""The built-in local volumes: what the persistentvolume controller and the kubelets agree on.

A kubelet that keeps files announces, on its Node, the directory it keeps local volumes in;
the controller makes a claim's volume a hostPath under the directory of the node it chose
(`raftkube.io/local-path`, the provisioner of the default StorageClass `standard`).
"""

PROVISIONER = "raftkube.io/local-path"
VOLUME_DIR_ANNOTATION = "raftkube.io/local-volume-dir"
VOLUME_DIR_NAME = "local-volumes"  # under the kubelet's root dir
