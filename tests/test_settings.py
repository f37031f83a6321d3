import luabridge


def test_numthreads_round_trip(lua):
    before = luabridge.eval("torch.getnumthreads()")
    luabridge.execute("torch.setnumthreads(1)")
    assert luabridge.eval("torch.getnumthreads()") == 1
    luabridge.execute(f"torch.setnumthreads({before})")
    assert luabridge.eval("torch.getnumthreads()") == before
    try:
        luabridge.execute("torch.setnumthreads(0)")
    except luabridge.LuaError as e:
        assert "positive integer" in e.message
    else:
        raise AssertionError("setnumthreads(0) must fail")


def test_heaptracking_flag(lua):
    assert luabridge.eval("torch._heaptracking") is True
    luabridge.execute("torch.setheaptracking(false)")
    assert luabridge.eval("torch._heaptracking") is False
    luabridge.execute("torch.setheaptracking(true)")
    assert luabridge.eval("torch._heaptracking") is True
