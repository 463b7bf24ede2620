"""pod_agent: the small program that runs on the GPU pod.

It is shipped to the pod as a tarball and runs under the pod's own Python
(>= 3.10) with only pydantic and PyYAML; it never imports ``console``.
"""

__version__ = "0.1.0"
