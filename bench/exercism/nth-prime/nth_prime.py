def prime(number):
    pass
