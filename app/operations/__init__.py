"""What the front ends compute: JSON data in, JSON data out.

The paper's whole method (:mod:`.whole_method`), a posted SRN (:mod:`.srn_solve`), the NIC
queue and transfer-time curve (:mod:`.nic`), capacity planning in human units
(:mod:`.capacity`), and net files on disk or in a request (:mod:`.net_files`,
:mod:`.pnml_input`).  The service runs these in its threads and worker processes; the
command line runs them in a child process.
"""

__all__: list[str] = []
