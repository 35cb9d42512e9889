"""Which AMD card a ROCm container gets: the KFD topology read, the cards listed in ROCm's order, the host's
choice matched by index or UUID."""

from __future__ import annotations

from pathlib import Path

from runner.launch.daemon.amd_cards import choose_card, list_cards, read_topology, rocm_device_choice


def node(gpu_id: int, render_minor: int, unique_id: int = 0) -> dict[str, str]:
    return {"gpu_id": f"{gpu_id}\n",
            "properties": f"simd_count 304\ndrm_render_minor {render_minor}\nunique_id {unique_id}\n"}


def test_cards_are_the_gpu_nodes_in_numeric_node_order() -> None:
    topology = {"10": node(7, 130, 3), "2": node(5, 129, 2), "1": node(4, 128, 1), "0": node(0, 0)}
    found = list_cards(topology)
    assert [(c.index, c.node, c.render_node) for c in found] == [
        (0, 1, "/dev/dri/renderD128"), (1, 2, "/dev/dri/renderD129"), (2, 10, "/dev/dri/renderD130")]


def test_cpu_nodes_and_gpus_without_a_render_node_are_not_cards() -> None:
    topology = {"0": node(0, 128), "1": node(4, 0), "2": {"gpu_id": "x", "properties": ""}, "3": node(9, 131)}
    assert [c.node for c in list_cards(topology)] == [3]


def test_uuid_is_the_unique_id_in_16_hex_digits() -> None:
    [card] = list_cards({"1": node(4, 128, 0x9E37700CAE3480B1)})
    assert card.uuid == "GPU-9e37700cae3480b1"
    [nameless] = list_cards({"1": node(4, 128, 0)})
    assert nameless.uuid is None


def test_choice_by_index_or_uuid_and_none_when_absent() -> None:
    found = list_cards({"1": node(4, 128, 1), "2": node(5, 129, 0xABC)})
    assert choose_card(found, "1") is found[1]
    assert choose_card(found, "GPU-0000000000000ABC") is found[1]  # UUIDs compare without case
    assert choose_card(found, "2") is None
    assert choose_card(found, "GPU-ffff") is None


def test_the_hosts_choice_comes_from_rocr_then_hip_then_ordinal_else_card_0() -> None:
    assert rocm_device_choice({}) == "0"
    assert rocm_device_choice({"GPU_DEVICE_ORDINAL": "3,1"}) == "3"
    assert rocm_device_choice({"HIP_VISIBLE_DEVICES": " 2 ,0", "GPU_DEVICE_ORDINAL": "3"}) == "2"
    assert rocm_device_choice({"ROCR_VISIBLE_DEVICES": "GPU-abc", "HIP_VISIBLE_DEVICES": "2"}) == "GPU-abc"
    assert rocm_device_choice({"ROCR_VISIBLE_DEVICES": ",", "HIP_VISIBLE_DEVICES": "1"}) == "1"


def test_read_topology_reads_each_node_and_skips_an_unreadable_one(tmp_path: Path) -> None:
    for name, files in {"0": node(0, 0), "1": node(4, 128, 5)}.items():
        (tmp_path / name).mkdir()
        for file, text in files.items():
            (tmp_path / name / file).write_text(text)
    (tmp_path / "2").mkdir()  # no files: skipped
    topology = read_topology(tmp_path)
    assert sorted(topology) == ["0", "1"]
    assert [c.render_minor for c in list_cards(topology)] == [128]
    assert read_topology(tmp_path / "missing") == {}
